# Test client: writes a torch.save file whose pickle would call os.system on load (the attack the
# safe reader must refuse). Nothing is executed here: the object is only pickled.
# usage: forbidden_global.py OUT_FILE
import os
import sys

import torch


class Payload:
    def __reduce__(self):
        return (os.system, ("echo wavetrain-was-exploited > /tmp/wavetrain_exploited",))


torch.save({"weight": torch.zeros(2), "payload": Payload()}, sys.argv[1])
