"""Training on several processes (DDP over gloo, two CPU processes on the demo corpus)."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.data.batching import make_batch
from rationale_cli.data.vocab import Vocab
from rationale_cli.runs.config import from_values
from rationale_cli.runs.run_directory import build_model
from rationale_cli.runs.task import infer_task
from rationale_cli.training.distributed import share, wrap
from rationale_cli.training.loop import training_loss

ROOT = Path(__file__).resolve().parent.parent
BATCH = 16  # per process
DETERMINISTIC = dict(extractor="attention", encoder="cnn", embedding_dim=16, hidden_size=16, dropout=0.0)
LAGRANGIAN = dict(data="demo", extractor="hardkuma", encoder="cnn", embedding_dim=16, hidden_size=16, batch_size=50,
                  epochs=2, budget=0.2, lr=0.005, dependent=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def join(rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def first_step(records, world: int = 1, rank: int = 0) -> dict:
    """The gradients of one training step on ``records`` (this process's share of them)."""
    train = sources.load("demo", "train")
    task, vocab = infer_task([r.label for r in train]), Vocab.build(r.tokens for r in train)
    torch.manual_seed(0)
    model = build_model(from_values(DETERMINISTIC), len(vocab), task)
    net = wrap(model, torch.device("cpu"))
    loss, _, _ = training_loss(net, task, make_batch(share(records, rank, world), vocab, task))
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def two_process_worker(rank: int, world: int, port: int, folder: str) -> None:
    """This process's share of a first step's gradients, then a whole training of LAGRANGIAN."""
    from rationale_cli.training.trainer import train_config

    join(rank, world, port)
    try:
        records = sources.load("demo", "train")[: world * BATCH]
        save_file(first_step(records, world, rank), f"{folder}/grads{rank}.safetensors")
        trained = train_config(from_values(LAGRANGIAN), Path(folder) / "run")
        state = {k: v.contiguous() for k, v in trained.model.state_dict().items()}
        save_file(state, f"{folder}/rank{rank}.safetensors")
    finally:
        dist.destroy_process_group()


def spawn(worker, folder: Path, world: int = 2) -> None:
    mp.spawn(worker, args=(world, free_port(), str(folder)), nprocs=world, join=True)


def test_two_processes_average_the_gradient_of_the_combined_batch_stay_in_step_and_only_rank_zero_writes(tmp_path):
    """One spawn of two gloo processes: each one's first-step gradient equals that of the two
    shares together in one process; then they train one model, identical in both, and only
    rank 0 writes the run."""
    spawn(two_process_worker, tmp_path)
    torch.set_num_threads(1)
    whole = first_step(sources.load("demo", "train")[: 2 * BATCH])
    for rank in (0, 1):
        grads = load_file(str(tmp_path / f"grads{rank}.safetensors"))
        assert grads.keys() == whole.keys()
        for name, value in whole.items():
            assert torch.allclose(grads[name], value, rtol=1e-5, atol=1e-7), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grads0.safetensors", "grads1.safetensors",
                                                          "rank0.safetensors", "rank1.safetensors", "run"]
    a, b = (load_file(str(tmp_path / f"rank{r}.safetensors")) for r in (0, 1))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    multipliers = [k for k in a if k.startswith("selector.lambda_l0") and k.endswith(".value")]
    assert multipliers and any(float(a[k]) != 0.0015 for k in multipliers)  # they moved, and agree
    run = tmp_path / "run"
    assert (run / "model.safetensors").is_file() and (run / "resume.safetensors").is_file()
    config = json.loads((run / "config.json").read_text())
    assert config["processes"] == 2 and config["effective_batch_size"] == 100
    metrics = json.loads((run / "metrics.json").read_text())
    assert [h["epoch"] for h in metrics["history"]] == [1, 2]


def torchrun(*args: str, processes: int = 2) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes),
               "-m", "rationale_cli", "train", *map(str, args)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_torchrun_trains_and_resumes_a_distributed_run_exactly(tmp_path):
    """The default model (dependent HardKuma on the RCNN, as docs/how-to/distributed.md trains
    it; here at small sizes), two gloo processes, stopped after an epoch and resumed."""
    options = ["--data", "demo", "--no-reference", "--embedding-dim", 16, "--hidden-size", 16, "--batch-size", 50,
               "--epochs", 2, "--seed", 3]
    whole, halves = tmp_path / "whole", tmp_path / "halves"
    result = torchrun("--out", whole, *options)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("epoch 2/2") == 1  # one process reports
    result = torchrun("--out", halves, *options, "--time-limit", 1e-6)
    assert result.returncode == 0 and "time limit" in result.stderr, result.stderr
    result = torchrun("--out", halves, "--resume", "--time-limit", 0)
    assert result.returncode == 0 and "resuming after epoch 1" in result.stderr, result.stderr
    for name in ("model.safetensors", "resume.safetensors"):
        a, b = (load_file(str(run / name)) for run in (whole, halves))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    single = CliRunner().invoke(app, ["train", "--out", str(halves), "--resume", "--epochs", "3"])
    assert single.exit_code == 2
    assert single.output.strip().endswith("trained on 2 process(es); resume it on as many (now 1)")


@pytest.mark.slow
def test_one_process_under_torchrun_goes_through_ddp_to_the_single_process_result(tmp_path):
    options = ["--data", "demo", "--no-reference", "--extractor", "bernoulli", "--encoder", "cnn", "--embedding-dim", 16,
               "--hidden-size", 16, "--batch-size", 50, "--epochs", 2, "--lagrangian", "--budget", 0.2,
               "--baseline", "ema", "--samples", 1]
    result = torchrun("--out", tmp_path / "ddp", *options, processes=1)
    assert result.returncode == 0, result.stderr
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the torchrun process has it (OMP_NUM_THREADS=1)
    try:
        plain = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "plain"), *map(str, options)])
    finally:
        torch.set_num_threads(threads)
    assert plain.exit_code == 0, plain.output
    for name in ("config.json", "model.safetensors"):
        assert (tmp_path / "ddp" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes(), name


@pytest.mark.parametrize("extractor", ["hardkuma", "bernoulli"])
def test_every_parameter_takes_part_when_every_rationale_is_empty(extractor):
    """A predictor that skips unselected steps reads no step of a batch whose sampled masks are
    all empty; its parameters must still be in the graph (with their exact gradient 0), as
    DistributedDataParallel expects every parameter at every step."""
    torch.manual_seed(0)
    records = sources.load("demo", "train")[:BATCH]
    task = infer_task([r.label for r in records])
    vocab = Vocab.build(r.tokens for r in records)
    model = build_model(from_values(dict(extractor=extractor, encoder="rcnn", embedding_dim=8, hidden_size=8,
                                         dependent=False)), len(vocab), task)
    head = model.selector.shape_layer if extractor == "hardkuma" else model.selector.logit_layer
    with torch.no_grad():  # HardKuma a ~ 0, b ~ 30 (or Bernoulli p ~ 0): every z is 0
        head.weight.zero_()
        head.bias.copy_(torch.tensor([-30.0, 30.0]) if extractor == "hardkuma" else torch.full_like(head.bias, -30.0))
    loss, selection, _ = training_loss(model, task, make_batch(records, vocab, task))
    assert not selection.masks.any()
    loss.backward()
    assert [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None] == []
    assert all(not p.grad.any() for p in model.predictor_encoder.parameters())  # and their gradient is 0
