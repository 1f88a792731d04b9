"""Experiment configurations: merge order, shipped configs, overrides, malformed files, values."""

from __future__ import annotations

from pathlib import Path

import pytest

from metricalc.benchmarks.hpatches_sequences.experiment import DEFAULT_CONF, HPatches
from metricalc.errors import InvalidInputError
from metricalc.experiment import config as cfg


def _load(conf, overrides=(), benchmarks=("hpatches", "other")):
    return cfg.load_config(
        conf,
        benchmark="hpatches",
        defaults=DEFAULT_CONF,
        benchmarks=list(benchmarks),
        overrides=list(overrides),
    )


def _write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


LAYERED = """
model:
  descriptor: orb
  max_keypoints: 500
  matcher: {ratio: 0.9}
benchmarks:
  hpatches:
    data: {quick: true, seed: 3}
    model: {max_keypoints: 300}
    eval: {estimator: LMEDS, ransac_th: [1, 2]}
  other:
    data: {quick: false, seed: 99}
    model: {max_keypoints: 7}
    eval: {estimator: DLT}
"""


def test_merge_order_defaults_model_benchmark_overrides(tmp_path):
    path = _write(tmp_path, LAYERED)
    conf = _load(path)
    values = conf.values
    assert values["model"]["descriptor"] == "orb"  # custom model over the default
    assert values["model"]["max_keypoints"] == 300  # benchmarks.hpatches.model over model
    assert values["model"]["matcher"] == {"mutual": True, "ratio": 0.9}  # nested keys merge
    assert values["data"]["quick"] is True and values["data"]["seed"] == 3
    assert values["data"]["border"] == DEFAULT_CONF["data"]["border"]  # untouched default
    assert values["eval"]["estimator"] == "LMEDS" and values["eval"]["ransac_th"] == [1, 2]
    assert values["eval"]["tau"] == DEFAULT_CONF["eval"]["tau"]
    assert conf.name == "mine" and conf.path == path
    # the other benchmark's section does not leak in; command-line overrides win over all
    conf = _load(path, ["model.max_keypoints=100", "eval.ransac_th=-1", "data.scenes=[camera]"])
    assert conf.values["model"]["max_keypoints"] == 100
    assert conf.values["eval"]["ransac_th"] == -1
    assert conf.values["data"]["scenes"] == ["camera"]
    assert conf.values["data"]["seed"] == 3


def test_origin_names_the_layer_that_set_a_key(tmp_path):
    path = _write(tmp_path, LAYERED)
    conf = _load(path, ["eval.tau=2"])
    assert conf.origin("eval.tau") == "command-line override 'eval.tau=2'"
    assert conf.origin("model.max_keypoints") == f"config file {path} (benchmarks.hpatches.model)"
    assert conf.origin("model.descriptor") == f"config file {path} (model)"
    assert conf.origin("data.border") == "the defaults"


def test_defaults_alone_and_the_defaults_are_not_modified():
    conf = _load(None)
    assert conf.values == DEFAULT_CONF and conf.name is None
    _load(None, ["eval.tau=1"])
    assert DEFAULT_CONF["eval"]["tau"] == 3.0


@pytest.mark.parametrize(
    "name", ["sift", "rootsift", "dspsift", "orb", "brief", "brisk", "akaze", "kaze", "raw_patch"]
)
def test_shipped_configs_are_named_after_the_descriptors(name):
    assert name in cfg.list_configs()
    conf = _load(name)
    HPatches().validate(conf)
    assert conf.name == name and conf.values["model"]["descriptor"] == name
    assert cfg.find_config(name) == cfg.CONFIG_DIR / f"{name}.yaml"


def test_the_gluefactory_config_sets_glue_factory_s_evaluation():
    """Glue Factory's ``eval.estimator=opencv eval.ransac_th=-1``: OpenCVHomographyEstimator's
    method, maxIters and confidence, the rounded selection rule and kornia's weighted DLT."""
    conf = _load("gluefactory")
    HPatches().validate(conf)
    assert conf.values["eval"] | {"tau": None, "tie_policy": None, "k": None} == {
        "tau": None,
        "tie_policy": None,
        "k": None,
        "estimator": "RANSAC",
        "ransac_th": -1,
        "max_iters": 3000,
        "confidence": 0.995,
        "ransac_selection": "gluefactory",
        "dlt": "gluefactory",
        "preset": None,  # the config file is not the preset (which also sets data.border)
    }
    assert DEFAULT_CONF["eval"]["ransac_selection"] == "unrounded"
    assert DEFAULT_CONF["eval"]["dlt"] == "svd" and DEFAULT_CONF["eval"]["max_iters"] == 2000


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("eval.ransac_selection=rounded", "one of unrounded, gluefactory"),
        ("eval.dlt=lu", "one of svd, kornia, gluefactory"),
    ],
)
def test_selection_and_dlt_values_are_checked(override, message):
    with pytest.raises(InvalidInputError, match=message):
        HPatches().validate(_load(None, [override]))


def test_a_path_wins_over_a_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "model: {descriptor: brief}\n", name="sift")
    assert _load("sift").values["model"]["descriptor"] == "brief"


def test_a_folder_does_not_hide_a_shipped_name(tmp_path, monkeypatch):
    """A folder named like a shipped config (``sift/`` of descriptors or results in the working
    folder) is not a config file: ``--conf sift`` still names the shipped one."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sift").mkdir()
    assert cfg.find_config("sift") == cfg.CONFIG_DIR / "sift.yaml"
    (tmp_path / "mine").mkdir()
    with pytest.raises(InvalidInputError, match="config mine is not a file"):
        cfg.find_config("mine")


def test_empty_config_file_is_the_defaults(tmp_path):
    assert _load(_write(tmp_path, "")).values == DEFAULT_CONF


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model: {descriptor: [unclosed\n", "is not valid YAML"),
        ("- a\n- b\n", "holds a list; expected a mapping"),
        ("eval: {tau: 1}\n", "unknown top-level key 'eval'"),
        ("benchmarks: {hpatch: {eval: {tau: 1}}}\n", "unknown benchmark 'benchmarks.hpatch'"),
        (
            "benchmarks: {hpatches: {evaluation: {}}}\n",
            "unknown key 'benchmarks.hpatches.evaluation'",
        ),
        ("benchmarks: {hpatches: {eval: {taux: 1}}}\n", "unknown key 'eval.taux'"),
        ("model: {matcher: {mutal: false}}\n", "unknown key 'model.matcher.mutal'"),
        ("model: [1, 2]\n", "key 'model' is a list; expected a mapping"),
        ("benchmarks: {hpatches: {data: 3}}\n", "'benchmarks.hpatches.data' is a int"),
        ("model: {descriptor: '${nowhere}'}\n", "key 'model.descriptor': Interpolation key"),
    ],
)
def test_malformed_config_files_name_the_file_and_key(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(InvalidInputError, match="config file") as info:
        _load(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_unknown_config_name_lists_the_shipped_ones():
    shipped = (
        "shipped configs: akaze, brief, brisk, dspsift, gluefactory, kaze, orb, raw, raw_patch, "
        "rootsift, sift"
    )
    with pytest.raises(InvalidInputError, match=shipped):
        _load("superpoint")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("eval.tau", "is not key=value"),
        ("=3", "is not key=value"),
        ("tau=3", "must start with data., model. or eval."),
        ("benchmarks.hpatches.eval.tau=3", "must start with data., model. or eval."),
        ("eval..tau=3", "must start with"),
        ("eval.tau=[1, 2", "not valid YAML"),
        ("eval.nope=1", "unknown key 'eval.nope'"),
    ],
)
def test_malformed_overrides(override, message):
    with pytest.raises(InvalidInputError, match="override") as info:
        _load(None, [override])
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("data.root=''", "a non-empty string or null"),
        ("data.quick=yes please", "true or false"),
        ("data.scenes=camera", "a non-empty list of strings or null"),
        ("data.scenes=[]", "a non-empty list of strings or null"),
        ("data.seed=-1", "an integer >= 0"),
        ("data.size=16", "an integer >= 32"),
        ("data.border=-5", "a finite number >= 0"),
        ("data.border=.nan", "a finite number >= 0"),
        (
            "model.descriptor=superpoint",
            "one of sift, rootsift, dspsift, orb, brief, brisk, akaze, kaze, raw_patch",
        ),
        ("model.detector=harris", "one of sift, orb, fast, brisk, akaze, kaze or null"),
        ("model.max_keypoints=0", "an integer >= 1 or null"),
        ("model.max_keypoints=1.5", "an integer >= 1 or null"),
        ("model.matcher.mutual=1", "true or false"),
        ("model.matcher.ratio=1.5", "a finite number > 0 and <= 1"),
        ("model.matcher={a: 1}", "unknown key"),
        ("eval.tau=abc", "a finite number >= 0"),
        ("eval.tie_policy=random", "one of"),
        ("eval.estimator=poselib", "one of DLT, LMEDS, RANSAC, USAC_DEFAULT, USAC_MAGSAC"),
        ("eval.ransac_th=0", "a positive number of pixels, a list of them, or -1"),
        ("eval.ransac_th=[1, x]", "a positive number of pixels, a list of them, or -1"),
        ("eval.max_iters=0", "an integer >= 1"),
        ("eval.confidence=0", "a finite number > 0 and <= 1"),
        ("eval.k=[0]", "an integer >= 1 or a non-empty list of them"),
    ],
)
def test_bad_values_name_key_value_and_origin(override, expected):
    key = override.split("=")[0]
    with pytest.raises(InvalidInputError) as info:
        HPatches().validate(_load(None, [override]))
    message = str(info.value)
    assert expected in message
    if "unknown key" not in message:
        assert f"config key {key} = " in message
        assert f"set by command-line override {override!r}" in message


def test_a_bad_value_in_a_file_names_the_file(tmp_path):
    path = _write(tmp_path, "benchmarks: {hpatches: {eval: {tie_policy: random}}}\n")
    with pytest.raises(InvalidInputError, match=r"set by config file .*mine\.yaml \(benchmarks"):
        HPatches().validate(_load(path))


def test_features_folder_needs_no_detector():
    HPatches().validate(_load(None, ["model.features=/x", "model.descriptor=mine"]))
    with pytest.raises(InvalidInputError, match=r"model\.detector"):
        HPatches().validate(
            _load(None, ["model.features=/x", "model.descriptor=mine", "model.detector=sift"])
        )


def test_config_diff_and_hash():
    a = {"data": {"quick": True}, "model": {"m": {"x": 1}}, "eval": {"k": [1, 5]}}
    b = {"data": {"quick": True}, "model": {"m": {"x": 2, "y": 0}}, "eval": {"k": [1]}}
    assert cfg.config_diff(a, b, ["data"]) == []
    assert cfg.config_diff(a, b, ["model"]) == ["model.m.x: 1 -> 2", "model.m.y: <unset> -> 0"]
    assert cfg.config_diff(a, b) == [
        "model.m.x: 1 -> 2",
        "model.m.y: <unset> -> 0",
        "eval.k: [1, 5] -> [1]",
    ]
    assert cfg.config_hash(a) == cfg.config_hash({"eval": {"k": [1, 5]}, **a})
    assert cfg.config_hash(a) != cfg.config_hash(b)
    assert len(cfg.config_hash(a)) == 64


@pytest.mark.parametrize("tag", ["", ".hidden", "a/b", "a b", "../x", 3])
def test_bad_tags(tag):
    with pytest.raises(InvalidInputError, match="tag"):
        cfg.check_tag(tag)
