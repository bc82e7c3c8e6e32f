#!/bin/sh
# fetch-llama.sh DIR: put the tested llama.cpp into DIR.
#
# Debian 12 packages no llama.cpp; the npm package node-llama-cpp carries
# upstream llama.cpp as a git bundle. This script packs the pinned version
# with npm, clones the bundle into DIR and checks that both the package
# version and the commit are the tested ones (docs/llama.cpp.md). An
# existing DIR at the right commit is reused as it is, so a second run
# fetches nothing; the downloaded package is kept in the cache directory
# ($SMOE_LLAMA_CACHE, default ${XDG_CACHE_HOME:-$HOME/.cache}/smoe-llama).
#
# Exit status: 0 when DIR holds the tested tree, 1 otherwise (with a
# message saying what differs).
set -eu

NPM_PKG=node-llama-cpp
NPM_VERSION=3.21.1
LLAMA_COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed

die() { echo "fetch-llama.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: fetch-llama.sh DIR"
dir=$1
cache=${SMOE_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/smoe-llama}

if [ -e "$dir" ]; then
    head=$(git -C "$dir" rev-parse HEAD 2>/dev/null) ||
        die "$dir exists but is not a git checkout: remove it or name another directory"
    [ "$head" = "$LLAMA_COMMIT" ] ||
        die "$dir is at commit $head, expected $LLAMA_COMMIT (remove it to refetch)"
    [ -f "$dir/include/llama.h" ] || die "$dir: include/llama.h is missing"
    echo "fetch-llama.sh: $dir is llama.cpp $LLAMA_COMMIT (reused)"
    exit 0
fi

command -v npm > /dev/null 2>&1 || die "npm is needed (apt-get install npm)"
command -v git > /dev/null 2>&1 || die "git is needed (apt-get install git)"
mkdir -p "$cache"
tgz=$cache/$NPM_PKG-$NPM_VERSION.tgz
if [ ! -f "$tgz" ]; then
    (cd "$cache" && npm pack --silent "$NPM_PKG@$NPM_VERSION" > /dev/null) ||
        die "npm pack $NPM_PKG@$NPM_VERSION failed"
    [ -f "$tgz" ] || die "npm pack did not write $tgz"
fi
tmp=$(mktemp -d "$cache/unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tgz" -C "$tmp" || die "$tgz: cannot unpack"
version=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$tmp/package/package.json" | head -1)
[ "$version" = "$NPM_VERSION" ] ||
    die "$tgz: package version is '$version', expected $NPM_VERSION"
bundle=$tmp/package/llama/gitRelease.bundle
[ -f "$bundle" ] || die "$tgz: package/llama/gitRelease.bundle is missing"

mkdir -p "$(dirname "$dir")"
git clone --quiet "$bundle" "$dir.tmp.$$" 2> "$tmp/clone.log" || {
    cat "$tmp/clone.log" >&2
    rm -rf "$dir.tmp.$$"
    die "git clone of the bundle failed"
}
head=$(git -C "$dir.tmp.$$" rev-parse HEAD)
if [ "$head" != "$LLAMA_COMMIT" ]; then
    rm -rf "$dir.tmp.$$"
    die "the bundle of $NPM_PKG@$NPM_VERSION is at $head, expected $LLAMA_COMMIT"
fi
mv "$dir.tmp.$$" "$dir"
echo "fetch-llama.sh: fetched llama.cpp $LLAMA_COMMIT into $dir"
