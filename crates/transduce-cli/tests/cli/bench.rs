//! `transduce bench`: the side-by-side exchange with another trainer.

use crate::harness::*;

/// `bench --exchange` writes the start of a side-by-side (`scripts/bench/gpu.sh`): the
/// initial weights under the bundle's names and the batch as I64 ids, BOS/EOS placed as
/// training places them. A run from those weights (`--init`) trains the same model: with
/// dropout 0 on the CPU it ends at the same loss, and a different draw does not.
#[test]
fn bench_exchange_starts_another_run_from_the_same_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("exchange");
    let bench = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "bench",
            "--preset",
            "tiny",
            "--batch-tokens",
            "260",
            "--steps",
            "2",
            "--dropout",
            "0",
            "--training-only",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        serde_json::from_str(out.lines().find(|l| l.starts_with('{')).unwrap()).unwrap()
    };
    let first = bench(&["--exchange", s(&dir)]);
    let again = bench(&["--init", s(&dir.join("init.safetensors"))]);
    assert_eq!(first["final_loss"], again["final_loss"]);
    assert_eq!(first["tokens_per_step"], 10 * 26);
    let batch = std::fs::read(dir.join("batch.safetensors")).unwrap();
    let batch = safetensors::SafeTensors::deserialize(&batch).unwrap();
    let ids = |name: &str| -> Vec<i64> {
        let t = batch.tensor(name).unwrap();
        assert_eq!(t.dtype(), safetensors::Dtype::I64, "{name}");
        t.data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let (src, tgt_in, tgt_out) = (ids("src"), ids("tgt_in"), ids("tgt_out"));
    assert_eq!((src.len(), tgt_in.len(), tgt_out.len()), (250, 260, 260));
    // Row 0: BOS, then the target; the target, then EOS.
    assert_eq!(tgt_in[0], 1);
    assert_eq!(tgt_out[25], 2);
    assert_eq!(tgt_in[1..26], tgt_out[..25]);
    let weights = std::fs::read(dir.join("init.safetensors")).unwrap();
    let weights = safetensors::SafeTensors::deserialize(&weights).unwrap();
    assert!(weights.tensor("embedding.weight").is_ok());
    assert!(
        weights
            .tensor("decoder.layers.0.cross_attn.q.weight")
            .is_ok()
    );
    // Another start ends elsewhere: the comparison can fail.
    std::fs::write(
        dir.join("init.safetensors"),
        transduce::bundle::save_weights(
            &transduce::Transformer::new(
                &transduce::ModelConfig::tiny(),
                &transduce::burn::prelude::Device::flex(),
            )
            .unwrap(),
            transduce::WeightDtype::F32,
        )
        .unwrap(),
    )
    .unwrap();
    let other = bench(&["--init", s(&dir.join("init.safetensors"))]);
    assert_ne!(first["final_loss"], other["final_loss"]);
}

/// `bench kernels` refuses the CPU backends (the fused kernels run on cubecl devices), and on
/// wgpu prints one row per family and variant whose launches show the fused path taken: fewer
/// than the unfused oracle's for attention, the norm, the loss and Adam; as many for dropout
/// (a mask and a product either way).
#[test]
fn bench_kernels_prints_each_family_against_its_oracle() {
    let refused = fail(&["bench", "kernels", "--backend", "cpu"]);
    assert!(refused.contains("--backend wgpu or cuda"), "{refused}");
    let out = bin()
        .args([
            "bench",
            "kernels",
            "--backend",
            "wgpu",
            "--preset",
            "tiny",
            "--batch-tokens",
            "52",
            "--precisions",
            "f32",
            "--calls",
            "1",
        ])
        .env("CUBECL_AUTOTUNE_LEVEL", "minimal")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("no usable GPU adapter") {
        transduce_testing::skip(format_args!(
            "bench_kernels_prints_each_family_against_its_oracle: {stderr}"
        ));
        return;
    }
    assert!(out.status.success(), "{stderr}");
    let table = String::from_utf8(out.stdout).unwrap();
    let launches = |family: &str, variant: &str| -> u64 {
        let row = table
            .lines()
            .find(|l| l.starts_with(family) && l.contains(&format!(" {variant} ")))
            .unwrap_or_else(|| panic!("no {family} {variant} row:\n{table}"));
        row.split_whitespace().last().unwrap().parse().unwrap()
    };
    for family in ["attention", "layer norm", "loss", "adam"] {
        let (fused, unfused) = (launches(family, "fused"), launches(family, "unfused"));
        assert!(
            fused < unfused,
            "{family}: {fused} fused, {unfused} unfused\n{table}"
        );
    }
    assert_eq!(
        launches("dropout", "fused"),
        launches("dropout", "unfused"),
        "{table}"
    );
}
