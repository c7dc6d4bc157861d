"""A serve process speaking the program-op protocol, for tests.

Reads one JSON request per line; answers each "measure" with a JSON line
carrying its id. Remembers the plans it was sent, and says how many in every
answer's message, so a test can see that plans arrive before measurements.
"""
import json
import os
import sys
import time

plans = 0
for line in sys.stdin:
    req = json.loads(line)
    if req["cmd"] == "plan":
        plans += 1
        continue
    x = req["config"]["X"]
    n = req["dims"]["N"]
    if x == 4:
        sys.stderr.write("serve.py: X=4 crashes\n")
        sys.stderr.flush()
        os._exit(7)
    if x == 5:
        time.sleep(60)
    us = (10 + (x - 2) ** 2) * n / 1024.0
    samples = [us] * 5 if x != 6 else [us, float("nan")]
    answer = {"tunefarm": 1, "id": req["id"], "check": "pass", "max_abs_err": 0.0,
              "samples_us": samples, "message": "plans=%d pid=%d" % (plans, os.getpid())}
    # Chatter on stdout is allowed; only the line with the id answers.
    print("serving X=%d" % x, flush=True)
    print(json.dumps(answer).replace("NaN", "\"nan\""), flush=True)
