//! Which x86-64 instruction set the CPU decoder's kernels use: the best the CPU has, or a
//! lower one forced by the environment variable `TRANSDUCE_CPU_ISA` (`avx512`, `avx2` or
//! `portable`), as CTranslate2's `CT2_FORCE_CPU_ISA` forces its own. Every path gives the
//! same bits, so forcing one changes the speed only: it lets one machine measure and test
//! the paths of another (the AVX2 figures on an AVX-512 CPU).
//!
//! Only the host decoder's own kernels follow it; burn's CPU backend and its matrix
//! products (gemm) pick their paths themselves.

use std::sync::OnceLock;

/// An instruction-set level, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// Plain loops (what the compiler makes of them for the build's target).
    Portable,
    /// AVX2 (256-bit integer and float lanes).
    Avx2,
    /// AVX-512 F and BW (512-bit lanes); the int8 product also needs VNNI.
    Avx512,
}

/// The environment variable that forces a lower level.
pub const FORCE_VAR: &str = "TRANSDUCE_CPU_ISA";

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// A level by its name (case aside), as [`FORCE_VAR`] gives it.
    pub fn parse(name: &str) -> Option<Isa> {
        match name.trim().to_ascii_lowercase().as_str() {
            "portable" | "generic" | "none" => Some(Isa::Portable),
            "avx2" => Some(Isa::Avx2),
            "avx512" | "avx-512" => Some(Isa::Avx512),
            _ => None,
        }
    }
}

/// The best level this CPU has.
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            return Isa::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return Isa::Avx2;
        }
    }
    Isa::Portable
}

/// The level the kernels use: [`detected`], lowered to [`FORCE_VAR`]'s where that is set
/// (a level above the CPU's stays the CPU's; a name that is none of the levels is said
/// once on stderr and ignored). Read once per process.
pub fn active() -> Isa {
    static ACTIVE: OnceLock<Isa> = OnceLock::new();
    *ACTIVE.get_or_init(|| {
        let best = detected();
        match forced() {
            Ok(Some(level)) => level.min(best),
            Ok(None) => best,
            Err(message) => {
                eprintln!("{message}");
                best
            }
        }
    })
}

/// The level [`FORCE_VAR`] asks for, if set; an error naming the value where it is none.
pub fn forced() -> Result<Option<Isa>, String> {
    match std::env::var(FORCE_VAR) {
        Ok(value) => Isa::parse(&value).map(Some).ok_or_else(|| {
            format!(
                "{FORCE_VAR}={value:?} is not one of avx512, avx2, portable: ignored, the \
                 decoder uses the CPU's best ({})",
                detected().name()
            )
        }),
        Err(_) => Ok(None),
    }
}

/// AVX2 is there and allowed.
#[inline]
pub fn avx2() -> bool {
    active() >= Isa::Avx2
}

/// AVX-512 F and BW are there and allowed.
#[inline]
pub fn avx512() -> bool {
    active() >= Isa::Avx512
}

/// AVX-512 VNNI is there and allowed (the int8 product's `vpdpbusd`).
#[inline]
pub fn avx512_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx512() && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_by_name_and_order_lowest_first() {
        for level in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
            assert_eq!(Isa::parse(level.name()), Some(level));
        }
        assert_eq!(Isa::parse(" AVX2 "), Some(Isa::Avx2));
        assert_eq!(Isa::parse("sse4"), None);
        assert!(Isa::Portable < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
        // Never above what the CPU has.
        assert!(active() <= detected());
    }
}
