//! Headless Chromium (Debian's `chromium`) through its command line: a page's rendered DOM
//! with the console messages it logged, and screenshots at a given window size, light or
//! dark. A missing chromium fails the test with the command that installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The chromium binary, or a failed test saying how to install it.
pub fn chromium() -> PathBuf {
    ["chromium", "chromium-browser"]
        .iter()
        .flat_map(|b| ["/usr/bin", "/usr/local/bin"].map(|d| Path::new(d).join(b)))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("chromium not found: install it with `sudo apt-get install chromium`"))
}

/// Chromium with its own profile in `profile`, to its end; stdout and stderr as text. A
/// run whose zygote could not fork its renderer (a host short of processes for a moment,
/// as under the server matrix) is Chromium's failure, not the page's: tried up to 3 times.
fn run(profile: &Path, args: &[&str]) -> (String, String) {
    let mut attempt = 1;
    loop {
        let out = Command::new(chromium())
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() && stderr.contains("Zygote could not fork") && attempt < 3 {
            eprintln!("chromium {args:?}: its zygote could not fork (attempt {attempt}); again");
            attempt += 1;
            std::thread::sleep(std::time::Duration::from_secs(1));
            continue;
        }
        assert!(out.status.success(), "chromium {args:?}: {stderr}");
        return (String::from_utf8_lossy(&out.stdout).into_owned(), stderr);
    }
}

/// A page as Chromium rendered it.
pub struct Rendered {
    /// The DOM after loading (`--dump-dom`).
    pub dom: String,
    /// What the page logged to the console (errors included), one line each.
    pub console: Vec<String>,
}

fn url(page: &Path) -> String {
    format!("file://{}", page.canonicalize().unwrap().display())
}

/// Load `page` and dump its DOM, with the console's messages from `--enable-logging`.
pub fn render(page: &Path, profile: &Path) -> Rendered {
    let (dom, stderr) = run(profile, &["--enable-logging=stderr", "--v=0", "--dump-dom", &url(page)]);
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(String::from)
        .collect();
    Rendered { dom, console }
}

/// A PNG of `page` at `width` × `height` into `shot`, in the dark scheme when `dark`;
/// its size in bytes.
pub fn screenshot(page: &Path, profile: &Path, shot: &Path, (width, height): (u32, u32), dark: bool) -> usize {
    let _ = std::fs::remove_file(shot);
    let size = format!("--window-size={width},{height}");
    let to = format!("--screenshot={}", shot.display());
    let mut args = vec![size.as_str(), to.as_str()];
    if dark {
        args.push("--force-dark-mode");
    }
    let page = url(page);
    args.push(&page);
    run(profile, &args);
    let png = std::fs::read(shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{} is no PNG", shot.display());
    png.len()
}
