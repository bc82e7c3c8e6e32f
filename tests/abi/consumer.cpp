// The public header from C++17 (tests/abi/check_install.sh): included twice,
// every declaration usable with C linkage, the initialiser macros valid
// C++ without warnings.
#include <smoe/smoe.h>
#include <smoe/smoe.h>

#include <cstdio>
#include <cstring>

int main()
{
    static_assert(SMOE_VERSION_MAJOR >= 1, "version macros are constant expressions");
    if (smoe_version_number() / 10000 != SMOE_VERSION_MAJOR ||
        smoe_version_number() < SMOE_VERSION_NUMBER) {
        std::fprintf(stderr, "consumer (C++): built with %s, running with %s\n",
                     SMOE_VERSION_STRING, smoe_version_string());
        return 1;
    }
    smoe_open_opts a = SMOE_OPEN_OPTS_INIT;
    smoe_open_opts b;
    smoe_open_opts_init(&b);
    smoe_stats st = SMOE_STATS_INIT;
    smoe_ring_region rr = SMOE_RING_REGION_INIT;
    smoe_vault_info vi = SMOE_VAULT_INFO_INIT;
    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    if (std::memcmp(&a, &b, sizeof a) != 0 || st.struct_size != sizeof st ||
        rr.struct_size != sizeof rr || vi.struct_size != sizeof vi ||
        wo.struct_size != sizeof wo) {
        std::fprintf(stderr, "consumer (C++): initialisers disagree\n");
        return 1;
    }
    smoe_stream *s = nullptr;
    int rc = smoe_open("/nonexistent/consumer.smoe", &a, &s);
    if (rc != SMOE_ESYS || s != nullptr || std::strlen(smoe_last_error()) == 0) {
        std::fprintf(stderr, "consumer (C++): smoe_open of a missing file gave %d\n", rc);
        return 1;
    }
    std::printf("consumer (C++): libsmoe_stream %s, %s: ok\n", smoe_version_string(),
                smoe_strerror(rc));
    return 0;
}
