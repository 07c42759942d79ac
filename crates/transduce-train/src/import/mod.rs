pub mod spm;
