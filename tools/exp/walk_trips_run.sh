# one device call: the persistent walk against one program per tile at 4-8 waves, forward
# (hd128 causal, 8 / 16 / 32 key blocks per tile) and backward (hd64 causal)
source tools/exp/gpu_run1.sh
L=.carry/libtile.so
for nb in "1024 4" "2048 2" "4096 1"; do
  set -- $nb
  python3 tools/ab_attention.py --lib $L --d 128 --n $1 --batch $2 --heads 32 --causal 1 --rounds 3 \
    --variant walk=@ --variant tile=persistent=0@ --variant walk1=persistent=1@
done
python3 tools/exp/walk_trips.py
