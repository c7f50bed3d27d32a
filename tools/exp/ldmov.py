"""ldmov.py - in nvdisasm output (tools/sass.sh), the register copies (IMAD.MOV / MOV) that
read a register whose latest writer, in program order, is a global load: each such copy
waits for that load. A loop that carries loads ahead (prefetch=D) without pfunroll=1 shows
them at its end (PERF.md 120). Rough: it follows program order, not the control flow, so a
branch written after the load (an element path) hides a copy, and copies in LLVM's
remainder iteration count too; read the lines it prints (second argument: any).

    bash tools/sass.sh /tmp/k.ptx > /tmp/k.sass; python3 tools/exp/ldmov.py /tmp/k.sass [v]"""
import re
import sys

last = {}
n = 0
for line in open(sys.argv[1]):
    m = re.search(r"\*/\s+(@!?U?P\d+\s+)?([A-Z0-9_.]+)\s+([^;]*);", line)
    if not m:
        continue
    op, args = m.group(2), [a.strip() for a in m.group(3).split(",")]
    if op.startswith("LDG"):
        d = re.match(r"R(\d+)", args[0])
        if d:
            width = {"128": 4, "64": 2}.get(op.split(".")[-1], 1)
            for k in range(width):
                last[int(d.group(1)) + k] = "LDG"
        continue
    if op.startswith("IMAD.MOV") or op == "MOV":
        s = re.match(r"R(\d+)$", args[-1])
        if s and last.get(int(s.group(1))) == "LDG":
            n += 1
            if len(sys.argv) > 2:
                print(line.rstrip())
    d = re.match(r"R(\d+)", args[0]) if args else None
    if d and not op.startswith(("ST", "BRA", "BSYNC", "BSSY", "ISETP", "FSETP")):
        last[int(d.group(1))] = op
print("copies of loaded registers:", n)
