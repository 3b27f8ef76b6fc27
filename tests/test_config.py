from pathlib import Path

import pytest

from rationale_cli.config import TrainConfig, load_toml, resolve
from rationale_cli.errors import UserError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_example_config_loads():
    values = load_toml(EXAMPLES / "beer.toml")
    assert values["extractor"] == "hardkuma" and values["hidden_size"] == 200 and values["lr"] == 0.0004


def test_command_line_wins_and_ints_become_floats(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("lr = 1\nepochs = 3\n")
    config = resolve(path, {"epochs": 5, "seed": None})
    assert config.lr == 1.0 and isinstance(config.lr, float)
    assert config.epochs == 5 and config.seed == TrainConfig().seed


def test_extractor_defaults_apply_unless_given():
    bernoulli, hardkuma = resolve(None, {"extractor": "bernoulli"}), resolve(None, {"extractor": "hardkuma"})
    assert (bernoulli.lagrange_rho, bernoulli.encoder) == (20.0, "rcnn")
    assert hardkuma.lagrange_rho == 1.0 and resolve(None, {"extractor": "simple"}).encoder == "l2x"
    assert resolve(None, {"extractor": "bernoulli", "lagrange_rho": 2}).lagrange_rho == 2.0


@pytest.mark.parametrize("text, message", [
    ("epochs = 'ten'\n", "expects int"),
    ("colour = 3\n", "unknown option"),
    ("epochs = \n", "not valid TOML"),
])
def test_bad_config_files_name_the_problem(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        resolve(path, {})


def test_missing_config_file():
    with pytest.raises(UserError, match="not found"):
        load_toml("nowhere.toml")
