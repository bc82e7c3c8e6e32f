/*
 * smoe_tier.h - the internal tier: what the smoe tool (tools/smoe) and the
 * tests may use beyond the public header, and the only library header
 * besides include/smoe/smoe.h that the tool includes.
 *
 * The model is zstd's ZSTD_STATIC_LINKING_ONLY section: declarations with
 * no ABI promise, for programs built from this tree that link the static
 * library (the smoe_internal CMake target gives its include path and
 * links smoe_stream_static). What is here: the vault's reader, writer and
 * checks (vault/vault.h), an index vault's sources and slot plan
 * (vault/source.h, vault/extent.h), the I/O table (io.h), error
 * reporting (error.h: smoe__fail), byte order (byteorder.h), ring sizing
 * (budget.h), the popularity file's codec (fill/freq.h), model headers
 * (vault/model_hdr.h), and the reuse policy's model, which the simulator
 * runs as the library does (policy/evict_reuse_model.h); on Windows the
 * UTF-8 to wide path conversion and error mapping (platform/win32.h). The stream
 * object itself (internal.h) is not: white-box tests include it by name.
 */
#ifndef SMOE_TIER_H
#define SMOE_TIER_H

#include "smoe/smoe.h"
#include "budget.h"
#include "byteorder.h"
#include "error.h"
#include "io.h"
#include "fill/freq.h"
#include "policy/evict_reuse_model.h"
#include "vault/extent.h"
#include "vault/model_hdr.h"
#include "vault/source.h"
#include "vault/vault.h"
#ifdef _WIN32
#include "platform/win32.h"
#endif

#endif
