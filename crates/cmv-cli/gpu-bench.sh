#!/usr/bin/env bash
# cmv bench on a GPU machine that has no Rust (docs/CLI.md, "cmv bench").
#
# Build here:   cargo build -p cmv-cli --release    (target/release/cmv; libcuda is loaded at
#               run time, so it builds without CUDA)
# Copy to DIR:  target/release/cmv, crates/cmv-cli/gpu-bench.sh, and all-MiniLM-L6-v2's
#               model.safetensors (`cargo xtask fetch-model` puts it in
#               target/models/all-MiniLM-L6-v2/)
# Run there:    DIR/gpu-bench.sh DIR
#
# For each registered format (`cmv formats`), with its default variant:
#   1. cmv compress MiniLM into a temporary folder;
#   2. cmv bench of it (every compressed tensor at batch 1, 4, 16 against dense fp16 and
#      cuBLAS; the sum over the linear layers);
#   3. cmv bench --synthetic llama-7b (one LLaMA-2-7B decoder layer's 7 linear layers, seeded
#      Gaussian weights, compressed in memory; the sum, and times 32 layers).
# It prints each step's time (VQ's MiniLM run and BEAM's default 64-bit layout take the
# longest; `FORMATS=...` runs fewer). Results go to $OUT (default DIR/out): summary.txt (every table, and how long each step
# took), cmv-gpu-bench.tar.gz (per run: the JSON report, the table, the progress log) and
# run.log (this script's output). A failed step is reported and the others still run; the
# exit status is the number of failed steps (0: all passed).
#
# Environment:
#   FORMATS        formats to run, as NAME or NAME:VARIANT, space-separated
#                  (default: every format of `cmv formats` with its default variant)
#   MODEL          the MiniLM safetensors (default DIR/model.safetensors)
#   BATCHES        default 1,4,16
#   MINILM_ARGS    extra `cmv bench` options for MiniLM (default: --min-rotation-mib 0
#                  --max-graph-calls 2000). Its 39 tensors are small (384 x 384 to 384 x 1536,
#                  but the embeddings), so the rotation's floor of 4 x L2 alone takes up to
#                  thousands of weight copies per tensor, and the bench's 20 replays of a graph
#                  over all of them take many seconds per tensor for a slow kernel (VQ's at
#                  batch 16); capped, a graph is replayed as often as 2000 calls allow, at least
#                  3 times.
#                  `--timing events` is faster still but adds the host's launch time to small
#                  kernels (to cuBLAS most), so its MiniLM numbers are not comparable.
#   SYNTH_ARGS     extra `cmv bench` options for the 7B layer set (default: --iters 200; graph
#                  timing and the bench's rotation of at least 1 GiB, as cargo xtask bench)
#   SKIP_MINILM=1, SKIP_SYNTHETIC=1   leave one part out
set -uo pipefail

DIR=${1:?usage: gpu-bench.sh DIR (DIR holds the cmv binary and model.safetensors)}
DIR=$(cd "$DIR" && pwd)
CMV=${CMV:-$DIR/cmv}
MODEL=${MODEL:-$DIR/model.safetensors}
OUT=${OUT:-$DIR/out}
BATCHES=${BATCHES:-1,4,16}
MINILM_ARGS=${MINILM_ARGS:---min-rotation-mib 0 --max-graph-calls 2000}
SYNTH_ARGS=${SYNTH_ARGS:---iters 200}

mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1

if [ ! -x "$CMV" ]; then
    echo "gpu-bench: no executable cmv at $CMV (copy target/release/cmv there, or set CMV)"
    exit 2
fi
if [ -z "${SKIP_MINILM:-}" ] && [ ! -f "$MODEL" ]; then
    echo "gpu-bench: no model at $MODEL (copy all-MiniLM-L6-v2's model.safetensors there, set MODEL, or SKIP_MINILM=1)"
    exit 2
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RES=$WORK/results
mkdir -p "$RES"

if [ -z "${FORMATS:-}" ]; then
    # `cmv formats`: a name per line, then "  variants: a, b (default a)".
    FORMATS=$("$CMV" formats | awk '
        /^[^ ]/ { name = $1 }
        /^  variants:/ { match($0, /\(default [^)]*\)/); v = substr($0, RSTART + 9, RLENGTH - 10); print name ":" v }')
fi

start=$SECONDS
failed=0
# Written as it goes, so that a run cut short leaves what it measured.
summary=$OUT/summary.txt
{
    echo "cmv gpu-bench: $("$CMV" --version), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "(nvidia-smi not found)"
    echo "formats: $(echo $FORMATS)"
} > "$summary"
cat "$summary"

# step NAME COMMAND...: runs COMMAND with stdout to RES/NAME.txt and stderr (the progress
# lines) to RES/NAME.log and the terminal, then appends the table and the time taken to the
# summary.
step() {
    local name=$1
    shift
    local t0=$SECONDS rc=0
    echo
    echo "::: $name: $*"
    "$@" 2>&1 > "$RES/$name.txt" | tee "$RES/$name.log" >&2
    rc=${PIPESTATUS[0]}
    local took=$((SECONDS - t0))
    {
        echo
        echo "===== $name ($took s, exit $rc): $*"
        cat "$RES/$name.txt"
        if [ "$rc" -ne 0 ]; then
            echo "--- last lines of $name.log:"
            tail -5 "$RES/$name.log"
        fi
    } >> "$summary"
    if [ "$rc" -ne 0 ]; then
        failed=$((failed + 1))
        echo "::: $name FAILED (exit $rc) after $took s"
    else
        echo "::: $name: $took s"
        # The sums, which is what docs/MODELS.md takes.
        sed -n '/^per-token weight time/,$p' "$RES/$name.txt"
    fi
    return "$rc"
}

for fv in $FORMATS; do
    format=${fv%%:*}
    variant=${fv#*:}
    [ "$variant" = "$fv" ] && variant=""
    vargs=()
    [ -n "$variant" ] && vargs=(--variant "$variant")
    tag=$format${variant:+-$variant}
    if [ -z "${SKIP_MINILM:-}" ]; then
        file=$WORK/minilm.$tag.safetensors
        if step "minilm-$tag-compress" "$CMV" compress "$MODEL" --format "$format" "${vargs[@]}" \
            -o "$file" --quiet --force; then
            # shellcheck disable=SC2086 # MINILM_ARGS is a list of options
            step "minilm-$tag-bench" "$CMV" bench "$file" --batches "$BATCHES" \
                --json-out "$RES/minilm-$tag-bench.json" $MINILM_ARGS
        fi
        rm -f "$file"
    fi
    if [ -z "${SKIP_SYNTHETIC:-}" ]; then
        # shellcheck disable=SC2086 # SYNTH_ARGS is a list of options
        step "llama7b-$tag-bench" "$CMV" bench --synthetic llama-7b --format "$format" \
            "${vargs[@]}" --batches "$BATCHES" --json-out "$RES/llama7b-$tag-bench.json" $SYNTH_ARGS
    fi
done

echo >> "$summary"
echo "gpu-bench: $failed failed steps, $((SECONDS - start)) s in all" >> "$summary"
cp "$summary" "$RES/summary.txt"
tar -czf "$OUT/cmv-gpu-bench.tar.gz" -C "$RES" .
echo
echo "gpu-bench: $failed failed steps, $((SECONDS - start)) s in all; results in $OUT (summary.txt, cmv-gpu-bench.tar.gz, run.log)"
exit "$failed"
