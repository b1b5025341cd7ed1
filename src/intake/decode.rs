//! Undoing a pushed body's compression — gzip, deflate (zlib or raw), zstd, and Snappy's
//! block format (Loki's protobuf) — with the size counted after decompression: output stops
//! one byte past the limit, so a compression bomb costs at most the limit. Knows nothing of
//! what the bytes mean.

use std::io::Read;

/// Largest body the log endpoints take, counted after decompression (413 above): a
/// Promtail or Vector batch of 1 MiB of lines fits with room to spare.
pub(crate) const MAX_DECODED: usize = 4 * 1024 * 1024;

/// How a body is compressed (`Content-Encoding`, or the protocol's rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Identity,
    Gzip,
    Deflate,
    Zstd,
    /// Snappy's block ("raw") format, as Loki's protobuf push uses it.
    Snappy,
}

impl Encoding {
    /// The `Content-Encoding` value (absent: identity); `None` for one not taken.
    pub(crate) fn from_header(value: Option<&str>) -> Option<Encoding> {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("" | "identity") => Some(Encoding::Identity),
            Some("gzip" | "x-gzip") => Some(Encoding::Gzip),
            Some("deflate") => Some(Encoding::Deflate),
            Some("zstd") => Some(Encoding::Zstd),
            Some("snappy") => Some(Encoding::Snappy),
            Some(_) => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
            Encoding::Zstd => "zstd",
            Encoding::Snappy => "snappy",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("the body is over {} KiB once decompressed: send smaller batches", limit / 1024)]
    TooLarge { limit: usize },
    #[error("the body is not valid {encoding}: {detail}")]
    Corrupt { encoding: &'static str, detail: String },
}

/// `body` decompressed, refused past `limit` bytes of output.
pub(crate) fn decode(body: Vec<u8>, encoding: Encoding, limit: usize) -> Result<Vec<u8>, DecodeError> {
    let corrupt = |e: std::io::Error| DecodeError::Corrupt {
        encoding: encoding.as_str(),
        detail: e.to_string(),
    };
    match encoding {
        Encoding::Identity if body.len() > limit => Err(DecodeError::TooLarge { limit }),
        Encoding::Identity => Ok(body),
        Encoding::Gzip => capped(flate2::read::MultiGzDecoder::new(&body[..]), limit).map_err(corrupt)?,
        // HTTP's "deflate" is zlib-wrapped (RFC 9110); some senders send raw deflate.
        Encoding::Deflate if zlib_header(&body) => {
            capped(flate2::read::ZlibDecoder::new(&body[..]), limit).map_err(corrupt)?
        }
        Encoding::Deflate => capped(flate2::read::DeflateDecoder::new(&body[..]), limit).map_err(corrupt)?,
        Encoding::Zstd => {
            let reader = ruzstd::decoding::StreamingDecoder::new(&body[..]).map_err(|e| DecodeError::Corrupt {
                encoding: "zstd",
                detail: e.to_string(),
            })?;
            capped(reader, limit).map_err(corrupt)?
        }
        Encoding::Snappy => {
            let corrupt = |e: snap::Error| DecodeError::Corrupt {
                encoding: "snappy (block format)",
                detail: e.to_string(),
            };
            // The block format states its length first: a bomb is refused before any work.
            let len = snap::raw::decompress_len(&body).map_err(corrupt)?;
            if len > limit {
                return Err(DecodeError::TooLarge { limit });
            }
            snap::raw::Decoder::new().decompress_vec(&body).map_err(corrupt)
        }
    }
}

/// Read `r` to its end, or to one byte past `limit`.
fn capped(r: impl Read, limit: usize) -> std::io::Result<Result<Vec<u8>, DecodeError>> {
    let mut out = Vec::new();
    r.take(limit as u64 + 1).read_to_end(&mut out)?;
    Ok(if out.len() > limit {
        Err(DecodeError::TooLarge { limit })
    } else {
        Ok(out)
    })
}

/// A zlib stream's two-byte header: deflate method, a window ≤ 32 KiB, the check bits.
fn zlib_header(b: &[u8]) -> bool {
    b.len() >= 2 && b[0] & 0x0f == 8 && b[0] >> 4 <= 7 && (u16::from(b[0]) << 8 | u16::from(b[1])) % 31 == 0
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn each_encoding_round_trips() {
        let data = b"lock release failed\n".repeat(100);
        assert_eq!(decode(gzip(&data), Encoding::Gzip, 1 << 20).unwrap(), data);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&data).unwrap();
        assert_eq!(decode(z.finish().unwrap(), Encoding::Deflate, 1 << 20).unwrap(), data);
        let mut d = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        d.write_all(&data).unwrap();
        assert_eq!(decode(d.finish().unwrap(), Encoding::Deflate, 1 << 20).unwrap(), data);
        let zs = ruzstd::encoding::compress_to_vec(&data[..], ruzstd::encoding::CompressionLevel::Fastest);
        assert_eq!(decode(zs, Encoding::Zstd, 1 << 20).unwrap(), data);
        let sn = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decode(sn, Encoding::Snappy, 1 << 20).unwrap(), data);
    }

    #[test]
    fn bombs_stop_at_the_limit_and_garbage_is_corrupt() {
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 100 << 10);
        assert_eq!(
            decode(bomb, Encoding::Gzip, 1 << 20),
            Err(DecodeError::TooLarge { limit: 1 << 20 })
        );
        let sn = snap::raw::Encoder::new().compress_vec(&vec![0u8; 8 << 20]).unwrap();
        assert_eq!(
            decode(sn, Encoding::Snappy, 1 << 20),
            Err(DecodeError::TooLarge { limit: 1 << 20 })
        );
        for enc in [Encoding::Gzip, Encoding::Deflate, Encoding::Zstd, Encoding::Snappy] {
            let e = decode(b"\x1f\x8b not really compressed at all".to_vec(), enc, 1 << 20);
            assert!(matches!(e, Err(DecodeError::Corrupt { .. })), "{enc:?}: {e:?}");
        }
        assert_eq!(Encoding::from_header(Some(" GZIP ")), Some(Encoding::Gzip));
        assert_eq!(Encoding::from_header(Some("br")), None);
    }
}
