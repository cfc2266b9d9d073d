"""The example's job: says it started, counts twenty seconds, says it is done."""

import os
import time

print("started, pid", os.getpid(), flush=True)
for step in range(20):
    time.sleep(1)
    print("step", step, flush=True)
print("done", flush=True)
