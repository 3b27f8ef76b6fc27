import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from rationale_cli.models.budget import Budget, BudgetUse
from rationale_cli.models.options import Options, option, specs
from rationale_cli.models.selectors import SELECTORS, option_specs
from rationale_cli.runs.config import TrainConfig, from_saved, from_values, load_toml, resolve
from rationale_cli.runtime.errors import UserError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_example_configs_load():
    values = load_toml(EXAMPLES / "beer.toml")
    assert values["extractor"] == "hardkuma" and values["hidden_size"] == 200 and values["lr"] == 0.0004
    config = resolve(EXAMPLES / "beer.toml", {})
    assert config.options.budget == Budget(0.13) and config.options.dependent


def test_demo_toml_holds_the_demo_command_settings():
    from rationale_cli.cli import DEMO_SETTINGS

    assert load_toml(EXAMPLES / "demo.toml") == DEMO_SETTINGS


def test_command_line_wins_and_ints_become_floats(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("lr = 1\nepochs = 3\n")
    config = resolve(path, {"epochs": 5, "seed": None})
    assert config.lr == 1.0 and isinstance(config.lr, float)
    assert config.epochs == 5 and config.seed == TrainConfig().seed


def test_extractor_defaults_apply_unless_given():
    bernoulli, hardkuma = resolve(None, {"extractor": "bernoulli"}), resolve(None, {"extractor": "hardkuma"})
    assert (bernoulli.options.lagrange_rho, bernoulli.encoder) == (20.0, "rcnn")
    assert hardkuma.options.lagrange_rho == 1.0 and resolve(None, {"extractor": "simple"}).encoder == "rcnn"
    given = resolve(None, {"extractor": "bernoulli", "lagrangian": True, "lagrange_rho": 2})
    assert given.options.lagrange_rho == 2.0
    assert resolve(None, {}).extractor == "hardkuma"


def test_embeddings_are_trained_unless_vectors_are_given():
    assert resolve(None, {}).fix_embeddings is False
    assert resolve(None, {"embeddings": "v.txt"}).fix_embeddings is True
    assert resolve(None, {"embeddings": "v.txt", "fix_embeddings": False}).fix_embeddings is False


@pytest.mark.parametrize("text, budget", [("0.2", Budget(0.2)), ("10", Budget(count=10)), ("k=7", Budget(count=7)),
                                          ("15%", Budget(0.15)), ("1.0", Budget(1.0)), ("1", Budget(count=1))])
def test_budget_is_a_share_or_a_count(text, budget):
    assert resolve(None, {"budget": text}).options.budget == budget


def test_old_size_flags_are_aliases_of_budget():
    assert resolve(None, {"extractor": "simple", "k": 5}).options.budget == Budget(count=5)
    assert resolve(None, {"extractor": "sparsemap", "selection": 0.3}).options.budget == Budget(0.3)
    with pytest.raises(UserError, match="--budget and --k"):
        resolve(None, {"extractor": "simple", "k": 5, "budget": "0.2"})


@pytest.mark.parametrize("options, message", [
    ({"extractor": "simple", "k": 0}, "--budget 0: --extractor simple expects a share"),
    ({"extractor": "sparsemap", "budget": "1.5"}, "--budget 1.5: --extractor sparsemap expects a share"),
    ({"extractor": "attention", "budget": "0"}, "--budget 0: --extractor attention expects"),
    ({"extractor": "sparsemap", "tau": 3.0}, "--tau does not apply to --extractor sparsemap; its options: --budget, --pairwise"),
    ({"extractor": "sparse-attention", "budget": "0.2"}, "--budget does not apply to --extractor sparse-attention"),
    ({"extractor": "bernoulli", "baseline": "loo", "samples": 1}, "--samples 1: --extractor bernoulli expects 2 or more"),
    ({"extractor": "bernoulli", "lagrangian": False, "budget": "0.2"},
     "--budget 0.2: applies to --extractor bernoulli only with --lagrangian"),
    ({"extractor": "hardkuma", "transitions": 0.1, "coherence": 0.1}, "--coherence 0.1: .* no --transitions"),
    ({"extractor": "nope"}, "--extractor nope: expected one of full, attention, hardkuma"),
    ({"epochs": 0}, "--epochs 0: expected an integer >= 1"),
    ({"dropout": 1.5}, "--dropout 1.5: expected a number >= 0 and <= 0.9"),
    ({"lr": -1.0}, "--lr -1: expected a number > 0"),
    ({"extractor": "sparse-attention", "lam": 0.2}, "--lambda 0.2: .* --attention fusedmax or oscarmax"),
    ({"extractor": "simple", "k": 10.7}, "--k 10.7: expected a whole number"),
    ({"device": "tpu"}, "--device tpu: expected auto, cpu, cuda or cuda:N"),
])
def test_bad_options_are_one_line_naming_option_extractor_and_what_is_allowed(options, message):
    with pytest.raises(UserError, match=message) as err:
        resolve(None, options)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("text, message", [
    ("epochs = 'ten'\n", "c.toml: --epochs ten: expected an integer"),
    ("colour = 3\n", "c.toml: unknown option --colour"),
    ("epochs = \n", "not valid TOML"),
    ("extractor = 'sparsemap'\ntau = 2.0\n", "c.toml: --tau does not apply to --extractor sparsemap"),
])
def test_bad_config_files_name_the_problem(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        resolve(path, {})


def test_missing_config_file():
    with pytest.raises(UserError, match="not found"):
        load_toml("nowhere.toml")


def sample_value(spec):
    """A valid value other than the default, for every declared type."""
    if spec.kind == "bool":
        return not spec.default
    if spec.kind == "Budget":
        return Budget(count=3)
    if spec.choices:
        return next(c for c in spec.choices if c != spec.default)
    base = spec.low if spec.low is not None else (spec.above or 0) + 0.5
    value = base + (1 if spec.default in (None, base) else 0)
    return int(value) if spec.kind == "int" else float(value)


@pytest.mark.parametrize("extractor", list(SELECTORS))
def test_every_declared_option_reaches_the_selector(extractor):
    """A value given for each declared option, through the one path the command line and
    config files take, is what the model's selector holds (a dropped option fails here)."""
    from rationale_cli.runs.run_directory import build_model
    from rationale_cli.runs.task import Regression

    for name, spec in option_specs(extractor).items():
        values = {"extractor": extractor, name: sample_value(spec)}
        if extractor == "bernoulli" and name in ("budget", "lagrange_lr", "lagrange_rho"):
            values["lagrangian"] = True
        if name == "coherence" and extractor == "hardkuma":
            values["transitions"] = None
        if name == "samples":
            values["baseline"] = "ema"
        if name == "lam":
            values["attention"] = "fusedmax"
        if extractor == "saliency":
            values["support"] = "reference"
        config = resolve(None, values)
        model = build_model(config, 20, Regression())
        assert getattr(model.selector.options, name) == values[name], (extractor, name)
        saved = json.loads(json.dumps(config.to_dict()))
        assert from_saved(saved, "config.json") == config, (extractor, name)


def test_every_option_type_and_name_is_declarable():
    seen = {}
    for extractor in SELECTORS:
        for spec in specs(SELECTORS[extractor].Options).values():
            assert seen.setdefault(spec.name, spec.kind) == spec.kind, spec.name
            assert spec.help, spec.name


def test_runs_saved_before_budget_still_load():
    """A config.json as runs saved it before budgets: every extractor's options, the size in
    ``selection`` or ``k``."""
    old = {"data": "demo", "format": "auto", "aspect": None, "valid": None, "valid_fraction": 0.1,
           "task": "auto", "text_col": "text", "label_col": "label", "encoder": "l2x", "extractor": "simple",
           "selection": 0.13, "transitions": None, "dependent": False, "lagrange_lr": 0.05, "lagrange_rho": 1.0,
           "sparsity": 0.0003, "coherence": None, "baseline": "ema", "samples": 1, "lagrangian": False,
           "exact_penalty": True, "k": 7, "top_masks": 10, "pairwise": False, "kl_weight": 0.0, "tau": 1.0,
           "straight_through": False, "attention": "sparsemax", "gamma": 1.0, "lam": None, "embeddings": None,
           "embedding_dim": 50, "fix_embeddings": True, "hidden_size": 64, "dropout": 0.1, "min_freq": 1,
           "max_vocab": None, "epochs": 2, "batch_size": 20, "lr": 0.002, "weight_decay": 1e-6, "lr_decay": 1.0,
           "clip": 5.0, "patience": 0, "time_limit": 0.0, "seed": 0, "device": "auto"}
    simple = from_saved(old, "config.json")
    assert simple.options.budget == Budget(count=7) and simple.fix_embeddings is True
    hardkuma = from_saved({**old, "extractor": "hardkuma", "encoder": "rcnn", "transitions": 0.06}, "config.json")
    assert hardkuma.options.budget == Budget(0.13) and hardkuma.options.transitions == 0.06
    assert from_values({**hardkuma.to_dict()}) == hardkuma
    # training-only options are not range-checked when a saved run is loaded
    assert from_saved({**old, "seed": -1, "dropout": 0.95}, "config.json").seed == -1
    with pytest.raises(UserError, match="^config.json: "):  # one line, not a TypeError
        from_saved({**old, "extractor": ["simple"]}, "config.json")


@dataclass(frozen=True)
class Worded(Options):
    """The role's words of a held rate, without the declaration."""

    budget: "Budget" = option(Budget(0.2), "a rate", role="target held in training")


@dataclass(frozen=True)
class Declared(Options):
    """A held rate declared (other words), while ``on`` is."""

    budget: "Budget" = option(Budget(0.2), "a rate", role="whatever it says", use=BudgetUse.HELD, requires="on")
    on: "bool" = option(True, "hold the rate")


def test_the_rate_held_follows_the_declared_use_not_the_role_text():
    assert Worded().held_budget() is None and TrainConfig(options=Worded()).rate_target() is None
    assert Declared().held_budget() == Budget(0.2) and TrainConfig(options=Declared()).rate_target() == 0.2
    assert TrainConfig(options=Declared(on=False)).rate_target() is None  # its requires off
    assert TrainConfig(options=Declared(budget=Budget(count=5))).rate_target() is None  # a count is no rate
    with pytest.raises(UserError, match="--keep best-loss-at-rate: --extractor hardkuma expects best-loss"):
        resolve(None, {"keep": "best-loss-at-rate", "budget": 10})
    # the registered extractors declare it: hardkuma always, bernoulli with --lagrangian, the others never
    held = {name: specs(cls.Options)["budget"].use is BudgetUse.HELD for name, cls in SELECTORS.items()
            if "budget" in specs(cls.Options)}
    assert sorted(name for name, yes in held.items() if yes) == ["bernoulli", "hardkuma"]
    assert from_values({"extractor": "hardkuma", "budget": 0.3}).rate_target() == 0.3
    assert from_values({"extractor": "bernoulli", "lagrangian": False}).rate_target() is None
    assert from_values({"extractor": "sparsemap", "budget": 0.3}).rate_target() is None


def test_only_a_budget_declares_what_it_is_for():
    @dataclass(frozen=True)
    class Misdeclared(Options):
        rate: "float" = option(0.1, "a number", use=BudgetUse.HELD)

    with pytest.raises(TypeError, match="Misdeclared.rate: use= declares what a budget is for; this is a float"):
        specs(Misdeclared)
