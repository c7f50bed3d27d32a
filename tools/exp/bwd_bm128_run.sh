CARRY=$PWD/.carry; export TILE_LIB_DIR=$PWD/lib; PYSITE=$(mktemp -d)
python3 -m pip install -q --no-index --find-links $CARRY/wheels --target $PYSITE cffi pycparser && python3 -m pip install -q --no-index --no-deps --target $PYSITE $CARRY/tile_lang-*.whl || exit 2
PYTHONPATH=$PYSITE TILE_LIBRARY= timeout 220 python3 -u tools/exp/bwd_bm128_ab.py "$@" 2>&1 | grep -v Warning | tee $OUT/bm128.txt | cut -c1-250
