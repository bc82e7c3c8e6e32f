#!/bin/sh
# device_run.sh DIR: train the fixture and the large model on the GPU machine
# and leave the results in $OUT as archives of at most 15 MB a file (the
# transfer's limit per file): fixture.tgz, large.tgz.aa, .ab, ...
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/trained}
mkdir -p "$work" "$OUT"
cat > "$work/after.sh" <<EOS
#!/bin/sh
cd "$work" && tar czf - \$1 \$1.trace.gz \$1.ref.pt | split -b 15000000 - "$OUT/\$1.tgz."
touch "$work/\$1.done"
EOS
chmod +x "$work/after.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
PYTHONUNBUFFERED=1 python3 "$here/train.py" --out "$work" --after "$work/after.sh" \
    --seconds-fixture "${FIXTURE_S:-100}" --seconds-large "${LARGE_S:-330}" --text-mb 300 \
    > "$OUT/figures.jsonl" 2> "$OUT/train.log"
rc=$?
for i in $(seq 60); do
    [ -e "$work/large.done" ] || [ ! -d "$work/large" ] && [ -e "$work/fixture.done" ] && break
    sleep 1
done
ls -l "$OUT"
tail -n 40 "$OUT/train.log"
cat "$OUT/figures.jsonl"
exit $rc
