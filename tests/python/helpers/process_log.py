"""The processes a run starts while a flag is up (FlashInfer's JIT would start nvcc and ninja;
Inductor starts its C++ compiler), recorded by an audit hook."""
import sys


class ProcessLog:
    def __init__(self):
        self.active = False
        self.commands = []
        sys.addaudithook(self._audit)

    def _audit(self, event, args):
        if event == "subprocess.Popen" and self.active:
            self.commands.append(" ".join(map(str, args[1]))[:300] if args[1] else str(args[0]))
