"""caffe2.python.experiment_util.ModelTrainerLog: the CSV log file and external loggers."""

import argparse
import re

from framework.caffe2.python.experiment_util import ExternalLogger, ModelTrainerLog


class Collect(ExternalLogger):
    def __init__(self, fail=False):
        self.args, self.rows, self.fail = None, [], fail

    def set_runtime_args(self, runtime_args):
        self.args = runtime_args

    def log(self, log_dict):
        if self.fail:
            raise RuntimeError("down")
        self.rows.append(dict(log_dict))


def test_log_file_and_external_loggers(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    ok, broken = Collect(), Collect(fail=True)
    log = ModelTrainerLog("resnet", argparse.Namespace(batch_size=32), external_loggers=[ok, broken])
    assert re.fullmatch(r"resnet_\d{8}_\d{6}", log.experiment_id)
    assert ok.args["batch_size"] == 32 and ok.args["experiment_id"] == log.experiment_id and "hostname" in ok.args
    log.log(64, 2, {"loss": 0.5, "accuracy": 0.25})
    log.log(128, 4, {"loss": 0.25, "accuracy": 0.5})
    lines = (tmp_path / log.filename).read_text().splitlines()
    assert lines[0] == "# Namespace(batch_size=32)"
    assert lines[1] == (
        "time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,"
        "inputs_per_sec,accuracy,loss"
    )
    first, second = (line.split(",") for line in lines[2:])
    assert first[2:5] == ["64", "64", "2"] and second[2:5] == ["64", "128", "4"] and second[6:] == ["0.5", "0.25"]
    assert len(lines) == 4 and [r["input_count"] for r in ok.rows] == [64, 64]
    assert "Failed to call ExternalLogger: down" in caplog.text


def test_without_external_loggers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = ModelTrainerLog("x", {"lr": 0.1})
    log.log(10, 1, {})
    assert (tmp_path / log.filename).read_text().startswith("# {'lr': 0.1}\n")
