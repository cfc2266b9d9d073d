"""The rules every copy of a followed input keeps (`domain.following`), and a copy brought up
to date from its source (`services.following.copy_changed`), here between two folders."""

from __future__ import annotations

import json
import os
import pathlib

from corral.domain import following
from corral.services import following as follow_service
from corral.storage import objects


def test_files_that_name_others_come_after_them() -> None:
    changed = [("model_config.json", 5.0), ("models/m-v2/w.bin", 5.0),
               ("models/m-v2/meta.json", 5.0), ("old.txt", 1.0)]
    assert following.order(changed) == ["old.txt", "models/m-v2/meta.json",
                                        "models/m-v2/w.bin", "model_config.json"]


def test_a_small_file_names_the_copy_and_a_big_one_is_left_as_it_is() -> None:
    assert following.rewrite(b'{"p": "s3://b/d/models/x"}', "s3://b/d/", "/runs/j/in") == (
        b'{"p": "/runs/j/in/models/x"}')
    big = b"s3://b/d" + b" " * following.REWRITE_MAX
    assert following.rewrite(big, "s3://b/d", "/runs/j/in") == big
    assert following.own_outputs("/o/deploy", ["/o/deploy/service", "/o/other"]) == (
        "service",)
    assert following.skipped("service/ack.json", ("service",))
    assert not following.skipped("services.txt", ("service",))


def test_a_copy_gets_what_changed_named_for_it_and_not_the_jobs_own_outputs(
        tmp_path: pathlib.Path) -> None:
    src, dst = tmp_path / "deploy", tmp_path / "copy"
    (src / "models" / "m-v1").mkdir(parents=True)
    (src / "models" / "m-v1" / "w.txt").write_text("one")
    (src / "model_config.json").write_text(json.dumps({"path": f"{src}/models/m-v1"}))
    (src / "service").mkdir()
    (src / "service" / "ack.json").write_text("{}")
    seen: dict[str, str] = {}

    def copy() -> int:
        return follow_service.copy_changed(objects.local(src), objects.local(dst),
                                           (str(src), str(dst)), ("service",), seen)

    assert copy() == 2
    assert json.loads((dst / "model_config.json").read_text()) == {
        "path": f"{dst}/models/m-v1"}
    assert not (dst / "service").exists()
    assert copy() == 0  # nothing changed since
    (src / "models" / "m-v1" / "w.txt").write_text("one, again")
    os.utime(src / "models" / "m-v1" / "w.txt", ns=(1, 10**18))
    assert copy() == 1 and (dst / "models" / "m-v1" / "w.txt").read_text() == "one, again"
    # A server that starts again takes what the copy holds as seen, but for what it
    # rewrote (copied once more) and what changed.
    assert follow_service.copy_changed(objects.local(src), objects.local(dst),
                                       (str(src), str(dst)), ("service",), {}) == 1
