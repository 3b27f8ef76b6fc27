"""The toolkit on a platform without ``fork``, user ids, ``fcntl`` or signal masks (as on
Windows), simulated in a fresh interpreter (the third-party libraries imported first, with
their own platform branches): every module imports, and train, predict (with worker
processes) and evaluate run, the lock saying once that it cannot lock."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PRELUDE = textwrap.dedent("""
    import os, signal, sys
    os.environ.setdefault("USERNAME", "user")  # what getpass reads where there are no user ids
    import numpy, pandas, rich, spacy, torch, torch._dynamo, typer  # their own platform branches
    for name in ("fork", "forkpty", "register_at_fork", "getuid", "geteuid", "getgid"):
        if hasattr(os, name):
            delattr(os, name)
    sys.modules["fcntl"] = None  # import fcntl now fails
    import importlib, pkgutil, types
    import rationale_cli
    for module in pkgutil.walk_packages(rationale_cli.__path__, "rationale_cli."):
        importlib.import_module(module.name)
    # the toolkit's signals without masks (the standard library's POSIX internals keep theirs)
    masks_absent = types.ModuleType("signal")
    masks_absent.__dict__.update({k: v for k, v in vars(signal).items() if k != "pthread_sigmask"})
    import rationale_cli.runtime.signals
    rationale_cli.runtime.signals.signal = masks_absent
    import json
    from rationale_cli.cli import main
    for command in json.loads(sys.argv[1]):  # each command's exit status on a line of its own
        sys.argv = ["rationale", *command]
        try:
            main()
        except SystemExit as end:
            print("exit", end.code or 0, flush=True)
""")


def rationale(*commands: list[str]) -> subprocess.CompletedProcess:
    """The commands run one after another in one interpreter of the simulated platform."""
    return subprocess.run([sys.executable, "-c", PRELUDE, json.dumps(commands)], capture_output=True, text=True,
                          timeout=240)


def test_train_predict_and_evaluate_run_without_fork_user_ids_fcntl_or_signal_masks(tmp_path):
    run, out = tmp_path / "run", tmp_path / "predictions.jsonl"
    done = rationale(["train", "--data", "demo", "--epochs", "1", "--hidden-size", "16", "--embedding-dim", "16",
                      "--out", str(run)],
                     ["predict", str(run), "demo", "--out", str(out), "--workers", "2"],
                     ["evaluate", str(run), "demo", "--json", str(tmp_path / "m.json")])
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith("exit ")] == ["exit 0"] * 3, done.stderr
    assert done.stderr.count("this platform has no file locks") == 1
    assert len(out.read_text().splitlines()) == 300 and (tmp_path / "m.json").is_file()
