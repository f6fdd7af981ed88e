"""memq.plan.finetune on a tiny random Llama (built offline), plus the slow SmolLM2 run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from memq.errors import MemQError, PlanParseError  # noqa: E402
from memq.plan.cli import main  # noqa: E402
from memq.plan.data import derive_split  # noqa: E402
from memq.plan.finetune import TrainConfig, encode_example, read_losses, shared_prefix_loss, train  # noqa: E402
from memq.plan.planner import FineTunedPlanner  # noqa: E402
from memq.plan.prompt import planner_prompt  # noqa: E402

CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    """A 2-layer Llama with a byte-level tokenizer and a chat template, saved like a converted model."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    for special in ("<pad>", "<|im_start|>", "<|im_end|>"):
        vocab[special] = len(vocab)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<|im_end|>",
                                  additional_special_tokens=["<|im_start|>"])
    tok.chat_template = CHAT
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      pad_token_id=vocab["<pad>"], eos_token_id=vocab["<|im_end|>"], bos_token_id=vocab["<|im_start|>"])
    path = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(cfg).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path, tok


@pytest.fixture(scope="module")
def plans():
    return derive_split("webqsp", "train", limit=12).plans


def test_loss_covers_only_the_plan_tokens(tiny_base, plans):
    _, tok = tiny_base
    p = plans[0]
    ids, labels = encode_example(tok, planner_prompt(p.question, p.entities), p.text, 4096)
    assert len(ids) == len(labels)
    target = tok.decode([i for i, lab in zip(ids, labels, strict=True) if lab != -100])
    assert target == p.text + "<|im_end|>"
    assert labels[0] == -100


def test_shared_prefix_loss_equals_plain_loss(tiny_base, plans):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from memq.plan.finetune import _collate

    path, tok = tiny_base
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(path)),
                           LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"]))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            p.data.normal_(0, 0.05)
    examples = [encode_example(tok, planner_prompt(p.question, p.entities), p.text, 4096) for p in plans[:4]]
    ids, mask, labels = _collate(examples, tok.pad_token_id)
    plain = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    plain.backward()
    g1 = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    shared = shared_prefix_loss(model, ids, mask, labels)
    shared.backward()
    assert torch.allclose(plain, shared, atol=1e-5)
    for n, p in model.named_parameters():
        if p.grad is not None:
            assert torch.allclose(g1[n], p.grad, atol=1e-5), n


def test_train_checkpoint_resume_manifest_planner_and_eval_cli(tiny_base, plans, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    path, _ = tiny_base
    out = tmp_path / "adapter"
    cfg = TrainConfig(base=str(path), max_steps=3, batch_size=4, lr=5e-3, max_length=4096, checkpoint_every=2,
                      lora_r=4, lora_alpha=8)
    result = train(plans, out, cfg, data_info={"datasets": ["webqsp"]})
    assert result.steps == 3 and len(result.losses) == 3
    assert (out / "adapter_model.safetensors").exists() and (out / "checkpoint" / "optimizer.safetensors").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["base_model"]["sha256"] and manifest["data"]["examples"] == len(plans)
    assert manifest["data"]["datasets"] == ["webqsp"] and manifest["hyper_parameters"]["lora_r"] == 4
    assert manifest["training"]["steps"] == 3
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == path.name
    with pytest.raises(MemQError, match="--resume"):
        train(plans, out, cfg)
    more = TrainConfig(**{**cfg.__dict__, "max_steps": 5})
    resumed = train(plans, out, more, resume=True)
    assert resumed.steps == 5 and len(resumed.losses) == 2
    assert [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()] == [1, 2, 3, 4, 5]
    assert len(read_losses(out)) == 5

    planner = FineTunedPlanner(out, max_new_tokens=8)
    try:
        plan = planner.plan(plans[0].question, plans[0].entities)
        assert plan.steps
    except PlanParseError:
        pass  # a random tiny model writes garbage; what matters is that it ran
    assert planner.calls == 1

    scores = tmp_path / "dev.jsonl"
    assert main(["eval", "--split", "dev", "--adapter", str(out), "--limit", "3", "--json", "--batch-size", "2",
                 "--record", "--out", str(scores)]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["questions"] == 3 and 0.0 <= metrics["exact_match"] <= 1.0 and metrics["llm_calls"] == 3
    # the scores file is a saved run: `memq evaluate --plans` reads each plan back with no model call
    from memq.evaluate.saved import load_records, saved_plan
    from memq.plan.data import load_split

    records = load_records(scores)
    assert list(records) == [g.question_id for g in load_split("webqsp", "dev")[:3]]
    for rec in records.values():
        assert rec["planner"] == "finetuned" and rec["plan_raw"] == rec["predicted"]
        plan, _ = saved_plan(rec, {})
        assert isinstance(plan, PlanParseError) or plan.steps
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dev_metrics"]["questions"] == 3 and manifest["dev_metrics"]["limit"] == 3

    manifest["base_model"]["sha256"] = "0" * 64
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(MemQError, match="sha256"):
        FineTunedPlanner(out).plan("q?", ["x"])


def test_bucketed_batches_cover_every_example_once_and_group_lengths():
    from memq.plan.finetune import _batches

    lengths = [(i * 37) % 101 for i in range(203)]
    batches = _batches(203, 8, seed=3, epoch=1, lengths=lengths, bucket=5)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(203)) and len(batches) == -(-203 // 8)
    assert batches == _batches(203, 8, seed=3, epoch=1, lengths=lengths, bucket=5)  # deterministic
    assert batches != _batches(203, 8, seed=3, epoch=2, lengths=lengths, bucket=5)
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
    plain = _batches(203, 8, seed=3, epoch=1)
    plain_spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in plain) / len(plain)
    assert spread < plain_spread / 3  # little padding in a bucketed batch


def test_bad_training_settings_name_the_value():
    with pytest.raises(MemQError, match="'fp16'"):
        TrainConfig(precision="fp16")
    with pytest.raises(MemQError, match="-1"):
        TrainConfig(lora_r=-1)
    with pytest.raises(MemQError, match="'some/adapter'"):
        TrainConfig(lora_r=0, init_adapter="some/adapter")


def test_bf16_autocast_trains_on_the_cpu_near_the_fp32_run(tiny_base, plans, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    path, _ = tiny_base
    cfg = TrainConfig(base=str(path), max_steps=3, batch_size=4, lr=5e-3, max_length=4096, checkpoint_every=100,
                      lora_r=4, lora_alpha=8, lora_dropout=0.0)
    fp32 = train(plans, tmp_path / "fp32", cfg)
    bf16 = train(plans, tmp_path / "bf16", TrainConfig(**{**cfg.__dict__, "precision": "bf16"}))
    assert all(torch.isfinite(torch.tensor(bf16.losses)))
    assert bf16.losses != fp32.losses  # the products really ran in bfloat16
    assert bf16.losses == pytest.approx(fp32.losses, rel=0.02)
    manifest = json.loads((tmp_path / "bf16" / "manifest.json").read_text())
    assert manifest["training"]["precision"] == "bf16" and manifest["training"]["device"] == "cpu"


def test_stop_after_names_a_deadline_in_minutes(monkeypatch):
    from types import SimpleNamespace

    import memq.plan.train_flags as flags

    monkeypatch.setattr("time.time", lambda: 1000.0)
    assert flags.stop_at(SimpleNamespace(stop_after=2.5)) == 1150.0
    assert flags.stop_at(SimpleNamespace(stop_after=None)) is None
    with pytest.raises(SystemExit, match="--stop-after must be > 0 minutes, got -1"):
        flags.stop_at(SimpleNamespace(stop_after=-1.0))


def test_training_continues_from_an_adapter_and_records_it(tiny_base, plans, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from memq.files import sha256_file

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    path, _ = tiny_base
    cfg = TrainConfig(base=str(path), max_steps=3, batch_size=4, lr=5e-3, max_length=4096, checkpoint_every=100,
                      lora_r=4, lora_alpha=8, lora_dropout=0.0)
    parent = tmp_path / "parent"
    train(plans, parent, cfg)
    more = TrainConfig(**{**cfg.__dict__, "max_steps": 2, "init_adapter": str(parent)})
    child = tmp_path / "child"
    # stopped before its first step: the checkpoint holds the starting weights, which are the parent's
    assert not train(plans, child, more, stop_at=0.0).finished
    start = load_file(str(child / "checkpoint" / "adapter_model.safetensors"))
    weights = load_file(str(parent / "adapter_model.safetensors"))
    assert start.keys() == weights.keys() and all(torch.equal(start[k], weights[k]) for k in weights)
    fresh = train(plans, tmp_path / "fresh", TrainConfig(**{**cfg.__dict__, "max_steps": 2}))
    continued = train(plans, child, more, resume=True)
    assert continued.finished and continued.steps == 2
    assert continued.losses[0] < fresh.losses[0]  # it starts where the parent's 3 steps left off
    manifest = json.loads((child / "manifest.json").read_text())
    training = manifest["training"]
    assert manifest["hyper_parameters"]["init_adapter"] == "parent"  # named, not by this machine's path
    assert training["init_from"]["sha256"] == sha256_file(parent / "adapter_model.safetensors")
    assert training["init_from"]["steps"] == 3
    assert training["epochs_total"] == pytest.approx(training["init_from"]["epochs_done"] + training["epochs_done"])
    assert training["data_start_step"] == 3  # the batches after the parent's 3, not its first ones again
    with pytest.raises(MemQError, match="rank 4"):
        train(plans, tmp_path / "r8", TrainConfig(**{**more.__dict__, "lora_r": 8, "lora_alpha": 16}))
    with pytest.raises(MemQError, match="no LoRA adapter"):
        train(plans, tmp_path / "none", TrainConfig(**{**more.__dict__, "init_adapter": str(tmp_path / "fresh" / "x")}))


def test_a_continued_run_starts_at_its_parents_epoch_position():
    from memq.plan.finetune import data_start_step

    assert data_start_step({}, 100) == 0
    assert data_start_step({"epochs_total": None}, 100) == 0
    assert data_start_step({"epochs_total": 0.598}, 3344) == 2000
    assert data_start_step({"epochs_total": 2.5}, 10) == 25  # divmod in the loop takes it to epoch 2, batch 5
    # a parent trained on other data: this data's first epoch from its first batch
    assert data_start_step({"epochs_total": 0.897, "data_sha256": "aa"}, 288, "bb") == 0
    assert data_start_step({"epochs_total": 0.5, "data_sha256": "aa"}, 288, "aa") == 144


def test_a_parent_that_was_itself_continued_counts_all_its_epochs(tmp_path):
    from memq.plan.checkpoint import parent_adapter

    cfg = TrainConfig(lora_r=4, init_adapter=str(tmp_path))
    (tmp_path / "adapter_model.safetensors").write_bytes(b"weights")
    (tmp_path / "adapter_config.json").write_text(json.dumps({
        "base_model_name_or_path": Path(cfg.base).name, "r": 4, "target_modules": list(cfg.target_modules)}))
    (tmp_path / "manifest.json").write_text(json.dumps({"training": {"epochs_done": 0.179, "epochs_total": 0.598}}))
    parent = parent_adapter(cfg)
    assert (parent["epochs_done"], parent["epochs_total"]) == (0.179, 0.598)
    assert parent["data_sha256"] is None and parent["adapter"] == tmp_path.name  # no path of this machine
    (tmp_path / "manifest.json").write_text(json.dumps({"training": {"epochs_done": 0.419}}))  # a fresh parent
    assert parent_adapter(cfg)["epochs_total"] == 0.419


def test_stop_at_leaves_a_checkpoint_that_resumes_to_the_same_run(tiny_base, plans, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    path, _ = tiny_base
    cfg = TrainConfig(base=str(path), max_steps=4, batch_size=4, lr=5e-3, max_length=4096, checkpoint_every=100,
                      lora_r=4, lora_alpha=8, lora_dropout=0.0)
    whole = train(plans, tmp_path / "whole", cfg)
    out = tmp_path / "pieces"
    stopped = train(plans, out, cfg, stop_at=0.0)  # the deadline has passed: stop before the first step
    assert not stopped.finished and stopped.steps == 0 and (out / "checkpoint" / "state.json").exists()
    assert not (out / "manifest.json").exists()
    import time as real_time
    from types import SimpleNamespace

    import memq.plan.finetune as ft

    clock = iter([0.0, 0.0, 1.0])  # the deadline (0.5) passes after two steps
    monkeypatch.setattr(ft, "time", SimpleNamespace(time=lambda: next(clock, 1.0), perf_counter=real_time.perf_counter,
                                                    strftime=real_time.strftime, gmtime=real_time.gmtime))
    part = train(plans, out, cfg, resume=True, stop_at=0.5)
    monkeypatch.undo()
    assert not part.finished and part.steps == 2
    rest = train(plans, out, cfg, resume=True)
    assert rest.finished and rest.steps == 4
    assert read_losses(out) == pytest.approx(read_losses(tmp_path / "whole"), rel=1e-4)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["training"]["steps"] == 4 and manifest["hyper_parameters"]["bucket"] == 50
    assert whole.losses[-1] == pytest.approx(rest.losses[-1], rel=1e-4)


def test_full_fine_tune_writes_a_model_the_planner_loads(tiny_base, plans, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    path, _ = tiny_base
    out = tmp_path / "full"
    cfg = TrainConfig(base=str(path), max_steps=2, batch_size=4, lr=1e-3, max_length=4096, checkpoint_every=1,
                      lora_r=0)
    result = train(plans, out, cfg)
    assert result.finished and (out / "config.json").exists() and not (out / "adapter_config.json").exists()
    assert json.loads((out / "manifest.json").read_text())["kind"] == "full-planner"
    resumed = train(plans, out, TrainConfig(**{**cfg.__dict__, "max_steps": 3}), resume=True)
    assert resumed.steps == 3
    planner = FineTunedPlanner(out, max_new_tokens=4)
    try:
        planner.plan(plans[0].question, plans[0].entities)
    except PlanParseError:
        pass  # a random tiny model writes garbage; what matters is that the fine-tuned weights load
    assert planner.calls == 1


def test_a_nan_loss_stops_training_with_a_clear_error(tiny_base, plans, tmp_path, monkeypatch):
    import memq.plan.finetune as ft

    monkeypatch.setenv("MEMQ_CACHE", str(tmp_path / "cache"))
    path, _ = tiny_base
    monkeypatch.setattr(ft, "shared_prefix_loss", lambda *a: torch.tensor(float("nan"), requires_grad=True))
    cfg = TrainConfig(base=str(path), max_steps=3, batch_size=4, max_length=4096, lora_r=4, lora_alpha=8)
    with pytest.raises(MemQError, match="loss is nan at step 1"):
        train(plans, tmp_path / "nan", cfg)


@pytest.mark.slow
def test_cli_train_smollm2_20_steps_loss_decreases(tmp_path):
    out = tmp_path / "smol"
    cmd = [sys.executable, "-m", "memq.plan.cli", "train", "--base", "smollm2", "--max-steps", "20",
           "--batch-size", "4", "--lr", "1e-3", "--eval-limit", "0", "--no-progress", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    losses = read_losses(out)
    assert len(losses) == 20
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < first * 0.8, (first, last)


def test_an_adapter_in_the_repository_is_named_by_its_path_there():
    from memq.plan.checkpoint import shown_adapter
    from memq.plan.planner import REPO_ADAPTER

    assert shown_adapter(Path(str(REPO_ADAPTER).format(dataset="cwq"))) == "memory_bank/cwq/planner"
    assert shown_adapter(Path("/elsewhere/parent")) == "parent"
