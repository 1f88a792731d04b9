"""Protocol presets (``--preset``): each changes exactly the settings of its table, explicit
options win, the preset is recorded, and a preset given to another verb is a one-line error."""

from __future__ import annotations

import dataclasses
import json

import pytest

from metricalc import cube as cubes
from metricalc.benchmarks.hpatches_patches.cli import HPATCHES17_PROTOCOL
from metricalc.benchmarks.hpatches_sequences.cli import (
    KEYPOINT_PROTOCOL,
    _eval_settings,
    keypoint_protocol,
)
from metricalc.benchmarks.hpatches_sequences.experiment import DEFAULT_CONF, HPatches
from metricalc.cli import build_parser, main
from metricalc.commands.args import with_preset
from metricalc.errors import InvalidInputError
from metricalc.experiment import run
from metricalc.experiment.config import load_config
from metricalc.hpatches import D2NET_SEQUENCES, SEQUENCE_SPLITS
from metricalc.presets import PRESET_VERBS, PRESETS, preset_for
from metricalc.validation import TIE_POLICIES

KEYPOINT_PRESETS = [p.name for p in PRESETS.values() if p.verb == "keypoints eval"]


def _flat(values, prefix=""):
    if isinstance(values, dict):
        out = {}
        for key, value in values.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: values}


def _diff(before, after):
    """{key: value after} for every key whose value changed."""
    assert set(before) == set(after)
    return {key: after[key] for key in after if after[key] != before[key]}


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------


def test_the_table_names_its_sources_and_verbs():
    assert set(PRESETS) == {"d2net", "superpoint", "gluefactory", "hpatches-cvpr17", "workbench"}
    for name, preset in PRESETS.items():
        assert preset.name == name and preset.verb in PRESET_VERBS
        assert "@" in preset.source and "/" in preset.source.split()[0]  # repo/file@what
        assert preset.settings and all(s.source.strip() for s in preset.settings.values())
        assert preset_for(name, preset.verb) is preset


def test_every_setting_is_an_option_of_its_verb_with_a_valid_value():
    options = {
        "keypoints eval": KEYPOINT_PROTOCOL,
        "patches hpatches-eval": HPATCHES17_PROTOCOL,
        "run hpatches": _flat(DEFAULT_CONF),
    }
    for preset in PRESETS.values():
        assert set(preset.values()) <= set(options[preset.verb]), preset.name
    for name in KEYPOINT_PRESETS:
        values = PRESETS[name].values()
        assert values.get("split", "full") in SEQUENCE_SPLITS
        assert values.get("tie_policy", "expected") in TIE_POLICIES
    conf = load_config(None, benchmark="hpatches", defaults=DEFAULT_CONF,
                       preset=PRESETS["gluefactory"])  # fmt: skip
    HPatches().validate(conf)  # the values pass the benchmark's checks


def test_the_published_choices():
    """The values read from the sources (docs/presets.md), number for number."""
    assert PRESETS["d2net"].values() == {"split": "d2net", "border": 0.0, "max_keypoints": None}
    assert len(SEQUENCE_SPLITS["d2net"]) == 108
    assert PRESETS["superpoint"].values() == {
        "split": "full", "max_keypoints": 1000, "border": 0.0, "tau": 3.0,
    }  # fmt: skip
    assert PRESETS["workbench"].values() == {
        "max_keypoints": 2000, "border": 40.0, "tau": 3.0, "tie_policy": "workbench",
        "bojanic": True, "y0": "negative", "image_retrieval": True,
    }  # fmt: skip
    assert PRESETS["gluefactory"].values() == {
        "data.border": 0.0, "eval.estimator": "RANSAC", "eval.ransac_th": -1,
        "eval.max_iters": 3000, "eval.confidence": 0.995,
        "eval.ransac_selection": "gluefactory", "eval.dlt": "gluefactory",
    }  # fmt: skip
    assert PRESETS["hpatches-cvpr17"].values() == {"task": "all", "split": "full",
                                                   "distance": "l2"}  # fmt: skip


# --------------------------------------------------------------------------------------------
# keypoints eval
# --------------------------------------------------------------------------------------------

BASE = ["keypoints", "eval", "--data", "d", "--out", "c.nc"]


def _keypoint_options(*extra):
    return keypoint_protocol(build_parser().parse_args([*BASE, *extra]))


@pytest.mark.parametrize("name", KEYPOINT_PRESETS)
def test_a_keypoint_preset_changes_exactly_its_settings(name):
    preset = PRESETS[name]
    without, none = _keypoint_options()
    with_, chosen = _keypoint_options("--preset", name)
    assert none is None and chosen is preset
    assert without == KEYPOINT_PROTOCOL
    assert with_ == {**without, **preset.values()}
    changed = _diff(without, with_)
    assert changed == {k: v for k, v in preset.values().items() if KEYPOINT_PROTOCOL[k] != v}
    assert changed  # every preset changes something
    # and the evaluation settings the pipeline receives differ in those settings only
    args = build_parser().parse_args([*BASE, "--descriptors", "sift"])
    before = dataclasses.asdict(_eval_settings(args, without)[0])
    after = dataclasses.asdict(_eval_settings(args, with_)[0])
    assert _diff(before, after) == {k: v for k, v in changed.items() if k != "split"}


def test_explicit_keypoint_options_override_the_preset():
    options, _ = _keypoint_options("--preset", "d2net", "--max-keypoints", "2000", "--border", "5")
    assert options["max_keypoints"] == 2000 and options["border"] == 5.0  # D2-Net's top-K version
    assert options["split"] == "d2net"
    options, _ = _keypoint_options("--preset", "superpoint", "--max-keypoints", "0")
    assert options["max_keypoints"] is None  # 0: all, given explicitly, not the preset's 1000
    options, _ = _keypoint_options("--preset", "workbench", "--no-image-retrieval",
                                   "--tie-policy", "expected", "--no-bojanic")  # fmt: skip
    assert options["image_retrieval"] is False and options["tie_policy"] == "expected"
    assert options["bojanic"] is False and options["max_keypoints"] == 2000
    options, _ = _keypoint_options("--preset", "superpoint", "--tau", "5", "--split", "d2net")
    assert options["tau"] == 5.0 and options["split"] == "d2net"
    assert options["max_keypoints"] == 1000


def _write_sequences(root, names):
    import cv2
    import numpy as np

    for name in names:
        (root / name).mkdir(parents=True)
        for k in range(1, 7):
            cv2.imwrite(str(root / name / f"{k}.png"), np.zeros((8, 8), np.uint8))
        for k in range(2, 7):
            np.savetxt(root / name / f"H_1_{k}", np.eye(3))


@pytest.mark.parametrize(("name", "missing"), [("d2net", "105 of its 108"),
                                                ("superpoint", "113 of its 116")])  # fmt: skip
def test_the_preset_split_reaches_the_loader(tmp_path, capsys, name, missing):
    _write_sequences(tmp_path / "seq", D2NET_SEQUENCES[:3])
    argv = ["keypoints", "eval", "--data", str(tmp_path / "seq"), "--out", str(tmp_path / "c.nc"),
            "--no-progress", "--preset", name]  # fmt: skip
    assert main(argv) == 2
    assert f"{missing} sequences are missing" in capsys.readouterr().err


def test_keypoints_eval_records_the_preset(quick_sequences, tmp_path, capsys):
    data = quick_sequences[0].root.parent
    argv = ["keypoints", "eval", "--data", str(data), "--descriptors", "sift", "--no-bojanic",
            "--max-keypoints", "150", "--no-progress"]  # fmt: skip
    assert main([*argv, "--out", str(tmp_path / "plain.nc")]) == 0
    preset_argv = ["--preset", "workbench", "--no-image-retrieval"]
    assert main([*argv, *preset_argv, "--out", str(tmp_path / "workbench.nc")]) == 0
    assert "(preset workbench)" in capsys.readouterr().out
    plain = cubes.open_cube(tmp_path / "plain.nc").attrs
    preset = cubes.open_cube(tmp_path / "workbench.nc").attrs
    assert plain["preset"] == "" and plain["preset_source"] == ""
    assert preset["preset"] == "workbench"
    assert preset["preset_source"] == PRESETS["workbench"].source
    changed = _diff(json.loads(plain["protocol_options"]), json.loads(preset["protocol_options"]))
    # the preset's table minus what was given explicitly (max keypoints, Bojanic, image retrieval)
    assert changed == {"tie_policy": "workbench"}
    same = set(plain) - {"preset", "preset_source", "protocol_options", "tie_policy"}
    assert {k: plain[k] for k in same} == {k: preset[k] for k in same}
    assert preset["tie_policy"] == "workbench" and plain["tie_policy"] == "expected"


# --------------------------------------------------------------------------------------------
# run hpatches
# --------------------------------------------------------------------------------------------


def test_gluefactory_preset_is_a_config_layer_under_the_explicit_ones():
    plain = load_config(None, benchmark="hpatches", defaults=DEFAULT_CONF)
    glue = PRESETS["gluefactory"]
    conf = load_config(None, benchmark="hpatches", defaults=DEFAULT_CONF, preset=glue)
    assert _diff(_flat(plain.values), _flat(conf.values)) == {
        **{k: v for k, v in glue.values().items() if _flat(DEFAULT_CONF)[k] != v},
        "eval.preset": "gluefactory",
    }
    assert conf.origin("eval.ransac_th").startswith("--preset gluefactory (cvg/glue-factory")
    override = load_config(None, benchmark="hpatches", defaults=DEFAULT_CONF, preset=glue,
                           overrides=["eval.ransac_th=2.0"])  # fmt: skip
    assert override.values["eval"]["ransac_th"] == 2.0
    assert override.values["eval"]["dlt"] == "gluefactory"
    shipped = load_config("sift", benchmark="hpatches", defaults=DEFAULT_CONF, preset=glue)
    assert shipped.values["eval"]["ransac_th"] == 3.0  # the config file wins over the preset
    assert shipped.values["data"]["border"] == 0.0


def test_eval_preset_cannot_be_set_by_hand():
    conf = load_config(None, benchmark="hpatches", defaults=DEFAULT_CONF,
                       overrides=["eval.preset=gluefactory"])  # fmt: skip
    with pytest.raises(InvalidInputError, match="set by --preset only"):
        HPatches().validate(conf)


def test_eval_hpatches_records_the_preset(tmp_path):
    small = ["data.scenes=[camera]", "data.size=256", "model.max_keypoints=150"]
    result = run("hpatches", preset="gluefactory", overrides=small, outputs=tmp_path, db=False)
    result.raise_for_status()
    assert result.tag == "gluefactory"  # no --conf: the preset names the run
    assert result.config["eval"]["preset"] == "gluefactory"
    assert result.config["data"]["border"] == 0.0
    attrs = result.open_cube().attrs
    assert attrs["preset"] == "gluefactory"
    assert attrs["preset_source"] == PRESETS["gluefactory"].source
    assert attrs["border_px"] == 0.0
    assert result.summaries["ransac_th"] in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)  # the sweep ran


# --------------------------------------------------------------------------------------------
# patches hpatches-eval
# --------------------------------------------------------------------------------------------


def test_hpatches_cvpr17_changes_exactly_its_settings():
    parse = build_parser().parse_args
    argv = ["patches", "hpatches-eval", "DIR"]
    without, _ = with_preset(parse(argv), HPATCHES17_PROTOCOL, "patches hpatches-eval")
    preset = PRESETS["hpatches-cvpr17"]
    with_, chosen = with_preset(parse([*argv, "--preset", "hpatches-cvpr17"]),
                                HPATCHES17_PROTOCOL, "patches hpatches-eval")  # fmt: skip
    assert chosen is preset and without == HPATCHES17_PROTOCOL
    assert with_ == {**without, **preset.values()}
    assert _diff(without, with_) == {"split": "full"}  # the rest equals metricalc's defaults
    given, _ = with_preset(parse([*argv, "--preset", "hpatches-cvpr17", "--split", "view"]),
                           HPATCHES17_PROTOCOL, "patches hpatches-eval")  # fmt: skip
    assert given["split"] == "view"


def test_hpatches_eval_records_the_preset(tmp_path, capsys):
    from metricalc.benchmarks.hpatches_cvpr17.generator import make_hpatches17_set

    descriptors = make_hpatches17_set(tmp_path, scenes=["camera"], max_patches=60, n_queries=30)
    argv = ["patches", "hpatches-eval", str(descriptors), "--tasks", str(tmp_path / "tasks"),
            "--pairs", "200", "--json"]  # fmt: skip
    assert main([*argv, "--split", "full", "--task", "all", "--distance", "l2"]) == 0
    explicit = json.loads(capsys.readouterr().out)
    assert main([*argv, "--preset", "hpatches-cvpr17", "--out", str(tmp_path / "hp17")]) == 0
    captured = capsys.readouterr()
    preset = json.loads(captured.out)
    assert "protocol: preset hpatches-cvpr17" in captured.err
    assert preset.pop("preset") == {
        "name": "hpatches-cvpr17", "source": PRESETS["hpatches-cvpr17"].source,
        "task": "all", "split": "full", "distance": "l2",
    }  # fmt: skip
    assert preset == explicit  # the preset is those options, nothing else
    for task in ("retrieval", "matching"):
        attrs = cubes.open_cube(tmp_path / f"hp17.{task}.nc").attrs
        assert attrs["preset"] == "hpatches-cvpr17"
        assert json.loads(attrs["protocol_options"]) == PRESETS["hpatches-cvpr17"].values()


# --------------------------------------------------------------------------------------------
# a preset on another verb
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "own"),
    [
        (["keypoints", "eval"], "{d2net,superpoint,workbench}"),
        (["run", "hpatches"], "{gluefactory}"),
        (["patches", "hpatches-eval"], "{hpatches-cvpr17}"),
        (["run", "patches"], "NAME"),
    ],
)
def test_each_verb_lists_only_its_own_presets(capsys, argv, own):
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert f"[--preset {own}]" in shown
    others = [name for name in PRESETS if name not in own]
    assert others and not any(name in shown for name in others), others


@pytest.mark.parametrize(
    ("argv", "owner"),
    [
        (["keypoints", "eval", "--data", "d", "--out", "c.nc", "--preset", "gluefactory"],
         "run hpatches"),
        (["keypoints", "eval", "--data", "d", "--out", "c.nc", "--preset", "hpatches-cvpr17"],
         "patches hpatches-eval"),
        (["patches", "hpatches-eval", "DIR", "--preset", "workbench"], "keypoints eval"),
        (["run", "hpatches", "--preset", "d2net", "--no-progress"], "keypoints eval"),
        (["run", "patches", "--preset", "gluefactory", "--no-progress"], "run hpatches"),
    ],
)  # fmt: skip
def test_a_preset_of_another_verb_is_a_one_line_error(tmp_path, capsys, argv, owner):
    assert main([*argv, "--outputs", str(tmp_path)] if argv[0] == "eval" else argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("metricalc: error: --preset ")
    assert f"applies to metricalc {owner}, not to metricalc" in err
    assert not (tmp_path / "results").exists()  # refused before any work
