# Sourced by bench/persistent_gpu.sh and bench/pingpong_gpu.sh (from the repo root): builds the
# tessera CLI into ${BUILD:-build-gpu} (T is its path) and writes the bf16 forms of
# tests/corpus/matmul_bias_gelu.tile into a fresh directory D: gelu.tile, bias.tile (the
# bias only) and plain.tile (no epilogue).
B=${BUILD:-build-gpu}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null &&
  timeout 400 cmake --build "$B" -j16 --target tessera 2>&1 | tail -1
T="$B/bin/tessera"
D=$(mktemp -d)
sed -e 's/f16/bf16/g' tests/corpus/matmul_bias_gelu.tile > "$D/gelu.tile"
sed -e 's/%gh = cast %g :/%gh = cast %x :/' "$D/gelu.tile" > "$D/bias.tile"
sed -e 's/%gh = cast %g :/%gh = cast %acc :/' "$D/gelu.tile" > "$D/plain.tile"
