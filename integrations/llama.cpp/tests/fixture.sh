# fixture.sh: sourced by the llama.cpp tests. make_fixture NAME ARCH SEED
# [mkmoe.py options] writes NAME.gguf (mkmoe.py; olmoe is written in F32
# and quantized with llama.cpp's own quantizer to Q4_K_M: q4_K and q6_K
# experts, two blob layouts) and packs it into NAME.smoe.
py() { PYTHONPATH=$SMOE_LLAMA_GGUF_PY "$SMOE_LLAMA_PY" "$@"; }
make_fixture() {
    fx_name=$1 fx_arch=$2 fx_seed=$3
    shift 3
    py "$here/mkmoe.py" "$fx_arch" $fx_name.gguf --seed "$fx_seed" "$@"
    if [ "$fx_arch" = olmoe ]; then
        "$SMOE_LLAMA_QUANTIZE" $fx_name.gguf $fx_name-q.gguf Q4_K_M
        mv $fx_name-q.gguf $fx_name.gguf
    fi
    "$SMOE_TOOL" pack --quiet --out $fx_name.smoe $fx_name.gguf > /dev/null
}
# run_logged MARKER OUT ERR CMD...: run a stock llama.cpp program with
# stdout in OUT and stderr in ERR. llama.cpp's log thread may lose its last
# lines at exit (common/log.cpp, common_log_main), the generated text among
# them: a run that exits 0 without MARKER (its last line) in OUT or ERR is
# run again, up to three times. Returns the program's status.
run_logged() {
    rl_mark=$1 rl_out=$2 rl_err=$3
    shift 3
    for rl_try in 1 2 3; do
        rl_rc=0
        "$@" < /dev/null > "$rl_out" 2> "$rl_err" || rl_rc=$?
        if [ $rl_rc -ne 0 ] || grep -q "$rl_mark" "$rl_out" "$rl_err"; then break; fi
    done
    return $rl_rc
}
# index_fixture NAME: index NAME.gguf into NAME-index.smoe (`smoe index`:
# the experts stay in the GGUF, the vault names their byte ranges).
index_fixture() {
    "$SMOE_TOOL" index --quiet --out $1-index.smoe $1.gguf > /dev/null
}
# vault_sizes VAULT: what `smoe inspect VAULT` says into info, and from it
# entries (layers x experts), topk, and quarter (a ring of 25%, rounded up).
vault_sizes() {
    info=$("$SMOE_TOOL" inspect "$1")
    entries=$(echo "$info" | sed -n 's/^entries *\([0-9]*\).*/\1/p')
    topk=$(echo "$info" | sed -n 's/^top_k *\([0-9]*\)$/\1/p')
    quarter=$(( (entries + 3) / 4 ))
}
