# one device call's setup (the carry's wheel unpacked), then the commands given
export PATH=$PATH:/usr/local/cuda/bin LD_LIBRARY_PATH=$PWD/.carry TILE_LIB_DIR=$PWD/lib
W=$(ls .carry/tile_lang-*.whl); python3 -c 'import zipfile,sys; open(".carry/libtile.so","wb").write(zipfile.ZipFile(sys.argv[1]).read("tile/libtile.so"))' $W
S=$(mktemp -d); python3 -m pip install -q --no-index --find-links .carry/wheels --target $S cffi pycparser; python3 -m pip install -q --no-index --no-deps --target $S $W
export PYTHONPATH=$S TILE_LIBRARY=
