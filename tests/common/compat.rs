//! What a test exercised on the server it ran against, and what that build lacked, in lines
//! `make compat` collects (it runs the server-facing files with `--show-output`) into the
//! matrix it writes, `docs/compat-matrix.md`: a branch that only asserts a refusal is named.

/// A server feature the test ran for real on this build.
pub fn exercised(what: &str) {
    println!("compat-exercised: {what}");
}

/// A server feature this build lacks: the test asserted the refusal and ran nothing more.
pub fn lacks(what: &str, why: &str) {
    println!("compat-lacks: {what} ({})", why.replace('\n', " "));
}
