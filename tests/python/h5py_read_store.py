# Test-only client: reads a wavetrain dataset store with h5py alone (no wavetrain), following
# docs/data-format.md, and prints JSON: the root attributes, and per split the item count and
# every item's fields (values as nested lists) and id.
import json
import sys

import h5py

with h5py.File(sys.argv[1], "r") as f:
    out = {"attributes": {k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()}, "splits": {}}
    for split, group in f.items():
        items = []
        n = int(group.attrs["items"])
        for i in range(n):
            item = {}
            for field, g in group.items():
                start, end = g["offsets"][i], g["offsets"][i + 1]
                values = g["data"][start:end]
                if field == "id":
                    item["id"] = bytes(values).decode("utf-8")
                else:
                    item[field] = values.tolist()
            items.append(item)
        out["splits"][split] = {"items": n, "data": items}
    print(json.dumps(out))
