"""Serve: keep the current model loaded, and load a new one without a restart.

The loop writes MODEL_HOT_UPDATE_CONFIG (model_config.json) when it deploys a model; this
reads it every MODEL_POLL_PERIOD_SECONDS and, when its model_update_time changed, loads
the model it names and says so by writing MODEL_HOT_UPDATE_ACK. The loop counts the
deploy as done only then. (A real service would answer requests meanwhile.)
"""

from __future__ import annotations

import json
import os
import pathlib
import time

import model


def acknowledge(update_time: str, status: str, message: str = "") -> None:
    ack = pathlib.Path(os.environ["MODEL_HOT_UPDATE_ACK"])
    tmp = ack.with_name(ack.name + ".tmp")
    tmp.write_text(json.dumps({"model_update_time": update_time, "status": status,
                               "message": message}))
    tmp.replace(ack)  # whole or not at all


def main() -> None:
    config = pathlib.Path(os.environ["MODEL_HOT_UPDATE_CONFIG"])
    period = float(os.environ.get("MODEL_POLL_PERIOD_SECONDS", "60"))
    loaded = None
    while True:
        try:
            conf = json.loads(config.read_text())["model_config"]
        except (OSError, ValueError, KeyError):
            conf = None
        if conf and conf["model_update_time"] != loaded:
            try:
                w = model.read(conf["model_path"])
            except (OSError, ValueError, KeyError) as exc:
                acknowledge(conf["model_update_time"], "failed", str(exc))
            else:
                loaded = conf["model_update_time"]
                name = pathlib.Path(conf["model_path"]).name
                print(f"{time.strftime('%H:%M:%S')} reloaded model {name} "
                      f"(model_update_time {loaded}); weights "
                      f"{', '.join(f'{x:.2f}' for x in w)}", flush=True)
                acknowledge(loaded, "loaded")
        time.sleep(period)


if __name__ == "__main__":
    main()
