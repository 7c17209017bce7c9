//! Little-endian field readers for the record formats (metadata, Bloom
//! headers). The callers check lengths first.

/// The little-endian `u64` at `at` of `b` (the caller checked the length).
pub(crate) fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The little-endian `u32` at `at` of `b` (the caller checked the length).
pub(crate) fn read_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}
