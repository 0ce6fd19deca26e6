"""Prints 'NAME passed failed skipped' for one meson testlog.json."""
import json
import sys

name, path = sys.argv[1:]
counts = {"passed": 0, "failed": 0, "skipped": 0}
with open(path) as f:
    for line in f:
        result = json.loads(line)["result"]
        if result == "OK":
            counts["passed"] += 1
        elif result == "SKIP":
            counts["skipped"] += 1
        else:
            counts["failed"] += 1
print(name, counts["passed"], counts["failed"], counts["skipped"])
