#!/usr/bin/env python3
"""Every shipped Hugging Face config through the binary: synth, plan at dp 8 with both
strategies, check --replan; and synth --list names every architecture they use.

Usage: test_configs.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import tempfile
import unittest
from pathlib import Path

from harness import ROOT, main, run


# Configs Megatron-LM cannot split over 2 tensor-parallel ranks, with paramlayout's reason.
TP2_REFUSED = {"falcon-h1-0.5b": "tp 2 does not divide the 1 Mamba groups"}
# Configs whose builder refuses a pipeline split, with paramlayout's reason.
PP_REFUSED = {"gemma-4-e2b": "Gemma 4 dense provider builds one pipeline stage only"}


def configs():
    return sorted(p for p in (ROOT / "testdata/configs").glob("*.json")
                  if p.name != "published.json")


class ShippedConfigs(unittest.TestCase):
    def test_every_config_plans_and_passes_replan_with_both_strategies(self):
        self.assertGreaterEqual(len(configs()), 35)
        with tempfile.TemporaryDirectory() as tmp:
            for config in configs():
                with self.subTest(config.stem):
                    manifest = Path(tmp, config.stem + ".json")
                    result = run("synth", config, "-q", "-o", manifest)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    params = json.loads(manifest.read_text())["params"]
                    self.assertGreater(len(params), 0)
                    for strategy in ("sequential-dp", "layerwise"):
                        layout = Path(tmp, f"{config.stem}.{strategy}.layout.json")
                        result = run("plan", manifest, "--dp", 8, "--strategy", strategy, "-q",
                                     "-o", layout)
                        self.assertEqual(result.returncode, 0, result.stderr)
                        check = run("check", layout, "--manifest", manifest, "--replan")
                        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

    def test_every_config_plans_as_a_job_at_tp_1_and_2_with_a_pipeline_split(self):
        # Each stage's chunk, as `job` writes it, passes check --replan. The split is two
        # stages of equal layers, or (odd layer counts) a first stage of half of them.
        for config in configs():
            text = json.loads(config.read_text())
            layers = text.get("text_config", text).get("num_hidden_layers",
                                                       text.get("n_layer"))
            split = ["--pipeline-model-parallel-size", "2"]
            if layers % 2:
                split += ["--decoder-first-pipeline-num-layers", str(layers // 2)]
            refused = TP2_REFUSED.get(config.stem)
            if refused:
                # Megatron-LM refuses tp 2 too: refused, and the pipeline split at tp 1.
                result = run("job", "--world-size", 8, "--hf-config", config, "-q", "--",
                             "--tensor-model-parallel-size", 2)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(refused, result.stderr)
            one_stage = PP_REFUSED.get(config.stem)
            if one_stage:
                # Megatron-Bridge refuses the pipeline split: refused, and tp 2 alone.
                result = run("job", "--world-size", 8, "--hf-config", config, "-q", "--",
                             *split)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(one_stage, result.stderr)
                split = []
            for tp, pp_args, world in ((1, [], 2), (1 if refused else 2, split, 8)):
                with self.subTest(f"{config.stem} tp{tp}{' pp' if pp_args else ''}"), \
                        tempfile.TemporaryDirectory() as tmp:
                    result = run("job", "--world-size", world, "--hf-config", config, "-q",
                                 "-o", tmp, "--", "--tensor-model-parallel-size", tp,
                                 *pp_args, "--bf16", "--use-distributed-optimizer")
                    self.assertEqual(result.returncode, 0, result.stderr)
                    layouts = sorted(Path(tmp).glob("stage*.chunk*.layout.json"))
                    self.assertEqual(len(layouts), 2 if pp_args else 1)
                    for layout in layouts:
                        manifest = str(layout).replace(".layout.json", ".manifest.json")
                        check = run("check", layout, "--manifest", manifest, "--replan")
                        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

    def test_list_names_every_architecture_the_configs_use(self):
        result = run("synth", "--list")
        self.assertEqual(result.returncode, 0, result.stderr)
        listed = {line.split()[0] for line in result.stdout.splitlines()}
        used = {json.loads(c.read_text())["architectures"][0] for c in configs()}
        self.assertLessEqual(used, listed)
        self.assertGreaterEqual(len(listed), 36)
        self.assertIn("Llama 2, 3, 3.1, 3.2", result.stdout)

    def test_synth_needs_a_config_unless_listing(self):
        result = run("synth")
        self.assertEqual(result.returncode, 2)
        self.assertIn("CONFIG is required (or --list", result.stderr)
        self.assertEqual(result.stdout, "")

    def test_an_unknown_architecture_names_the_known_ones_and_the_job_form(self):
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp, "config.json")
            config.write_text('{"architectures": ["Llama4ForConditionalGeneration"]}')
            result = run("synth", config)
            self.assertEqual(result.returncode, 2)
            self.assertIn('unknown architecture "Llama4ForConditionalGeneration"; known: '
                          "LlamaForCausalLM, DeciLMForCausalLM", result.stderr)
            self.assertIn("paramlayout job --world-size N -o DIR --", result.stderr)
            self.assertEqual(result.stdout, "")

    def test_notes_say_what_the_params_leave_out(self):
        result = run("synth", ROOT / "testdata/configs/deepseek-v3.json", "-o", "/dev/null")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("note: the router's expert bias (e_score_correction_bias) is a buffer",
                      result.stdout)


if __name__ == "__main__":
    main()
