//! The dense encoding: 16,384 registers of 6 bits packed LSB first into
//! 12,288 bytes (register `i` starts at bit `6 * i % 8` of byte
//! `6 * i / 8`, counting from the least significant bit, and continues in
//! the next byte).

use super::{Histogram, REGISTERS, REGISTER_MAX};

/// Bytes of packed registers.
pub(crate) const REGISTER_BYTES: usize = REGISTERS * 6 / 8;

/// The byte and the bit within it where register `index` starts: the
/// register lies in the 16-bit little-endian window of that byte and the
/// next.
pub(crate) fn position(index: usize) -> (usize, u32) {
    let bit = index * 6;
    // `bit % 8` is below 8.
    (bit / 8, (bit % 8) as u32)
}

/// The 16-bit little-endian window of bytes `at` and `at + 1` (a missing
/// second byte reads as zero, like the NUL after a Redis string).
fn window(regs: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([regs.get(at).copied().unwrap_or(0), regs.get(at + 1).copied().unwrap_or(0)])
}

/// Register `index` of packed registers `regs`; 0 if `regs` is too short.
pub(crate) fn get(regs: &[u8], index: usize) -> u8 {
    let (at, shift) = position(index);
    in_window(window(regs, at), shift)
}

/// The register starting at bit `shift` of the window `w` (see
/// [`position`]).
pub(crate) fn in_window(w: u16, shift: u32) -> u8 {
    let [v, _] = ((w >> shift) & u16::from(REGISTER_MAX)).to_le_bytes();
    v
}

/// The window `w` with the register at bit `shift` set to `value` (at most
/// 63).
pub(crate) fn with_register(w: u16, shift: u32, value: u8) -> u16 {
    let mask = u16::from(REGISTER_MAX) << shift;
    (w & !mask) | ((u16::from(value) << shift) & mask)
}

/// Sets register `index` to `value` (at most 63); bytes past the end of
/// `regs` are left out.
pub(crate) fn set(regs: &mut [u8], index: usize, value: u8) {
    let (at, shift) = position(index);
    let [lo, hi] = with_register(window(regs, at), shift, value).to_le_bytes();
    if let Some(b) = regs.get_mut(at) {
        *b = lo;
    }
    if let Some(b) = regs.get_mut(at + 1) {
        *b = hi;
    }
}

/// Raises register `index` to `count` if it is lower; returns whether it
/// changed.
pub(crate) fn set_max(regs: &mut [u8], index: usize, count: u8) -> bool {
    if count > get(regs, index) {
        set(regs, index, count);
        true
    } else {
        false
    }
}

/// Adds every register value to `hist`.
pub(crate) fn histogram(regs: &[u8], hist: &mut Histogram) {
    for i in 0..REGISTERS {
        hist[usize::from(get(regs, i))] += 1;
    }
}

/// Raises each of `max` to the matching register.
pub(crate) fn merge_into(max: &mut [u8; REGISTERS], regs: &[u8]) {
    for (i, m) in max.iter_mut().enumerate() {
        *m = (*m).max(get(regs, i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Setting any register to any value reads back, and leaves every other
    /// register as it was (the packing straddles bytes).
    #[test]
    fn set_get_round_trip_without_disturbing_neighbours() {
        let mut regs = vec![0u8; REGISTER_BYTES];
        let mut model = vec![0u8; REGISTERS];
        let mut x = 12345u32;
        for step in 0..20_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let i = (x >> 8) as usize % REGISTERS;
            let v = ((x >> 3) % 64) as u8;
            set(&mut regs, i, v);
            model[i] = v;
            if step % 1000 == 0 {
                for (j, &m) in model.iter().enumerate() {
                    assert_eq!(get(&regs, j), m, "register {j}");
                }
            }
        }
    }

    /// The layout is LSB first: register 0 is the low 6 bits of byte 0 and
    /// register 1 starts at bit 6 of byte 0.
    #[test]
    fn packing_is_lsb_first() {
        let mut regs = vec![0u8; REGISTER_BYTES];
        set(&mut regs, 0, 0b10_0001);
        assert_eq!(regs[0], 0b0010_0001);
        set(&mut regs, 1, 0b11_1111);
        assert_eq!(&regs[..2], &[0b1110_0001, 0b0000_1111]);
        set(&mut regs, REGISTERS - 1, 63);
        assert_eq!(regs[REGISTER_BYTES - 1], 0b1111_1100);
    }
}
