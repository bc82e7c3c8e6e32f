/*
 * A program built against the installed header and library only, as an
 * engine is (tests/abi/check_install.sh builds it through pkg-config and
 * through find_package). The header is included twice: its guard must make
 * the second inclusion harmless.
 *
 * Usage: consumer DIR    writes DIR/consumer.smoe, streams it, exits 0.
 */
#include <smoe/smoe.h>
#include <smoe/smoe.h>

#include <stdio.h>
#include <string.h>

#define BLOB 16384u

static int fail(const char *what, int rc)
{
    fprintf(stderr, "consumer: %s: %d %s: %s\n", what, rc, smoe_err_name(rc), smoe_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer DIR\n");
        return 2;
    }
    /* The header this was built with and the library it runs with. */
    if (smoe_version_number() / 10000 != SMOE_VERSION_MAJOR ||
        smoe_version_number() < SMOE_VERSION_NUMBER) {
        fprintf(stderr, "consumer: built with %s, running with %s\n", SMOE_VERSION_STRING,
                smoe_version_string());
        return 1;
    }
    if (strcmp(smoe_err_name(SMOE_ETRUNC), "SMOE_ETRUNC") != 0)
        return fail("smoe_err_name", SMOE_ETRUNC);

    char path[4096];
    snprintf(path, sizeof path, "%s/consumer.smoe", argv[1]);
    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    wo.layers = 1;
    wo.experts = 2;
    smoe_writer *w;
    int rc = smoe_writer_open(path, &wo, &w);
    if (rc < 0)
        return fail("smoe_writer_open", rc);
    smoe_component c;
    memset(&c, 0, sizeof c);
    strcpy(c.name, "w");
    c.dtype = SMOE_DTYPE_U8;
    c.ndim = 1;
    c.shape[0] = BLOB;
    c.nbytes = BLOB;
    uint32_t layout;
    static unsigned char data[BLOB];
    memset(data, 7, sizeof data);
    if ((rc = smoe_writer_add_layout(w, &c, 1, &layout)) < 0 ||
        (rc = smoe_writer_add_blob(w, 0, 0, layout, data, BLOB)) < 0 ||
        (rc = smoe_writer_add_blob(w, 0, 1, layout, data, BLOB)) < 0) {
        smoe_writer_abort(w);
        return fail("smoe_writer_add_*", rc);
    }
    if ((rc = smoe_writer_finish(w)) < 0)
        return fail("smoe_writer_finish", rc);

    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 2;
    o.flags = SMOE_OPEN_ALLOW_BUFFERED | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ |
              SMOE_OPEN_EXTENTS;
    smoe_stream *s;
    if ((rc = smoe_open(path, &o, &s)) < 0)
        return fail("smoe_open", rc);
    smoe_blob b;
    if ((rc = smoe_claim_wait(s, 0, 1, UINT64_MAX, &b)) < 0)
        return fail("smoe_claim_wait", rc);
    int ok = b.size == BLOB && ((const unsigned char *)b.data)[BLOB - 1] == 7;
    /* since 1.1: where a component lies in a claimed blob */
    smoe_component found;
    if ((rc = smoe_blob_find(s, &b, "w", &found)) < 0 ||
        (rc = smoe_blob_component(s, &b, 0, &found)) < 0)
        return fail("smoe_blob_component", rc);
    ok = ok && found.offset == 0 && found.nbytes == BLOB;
    smoe_release(s, &b);
    smoe_stats st = SMOE_STATS_INIT;
    if ((rc = smoe_get_stats(s, &st)) < 0)
        return fail("smoe_get_stats", rc);
    if ((rc = smoe_close(s)) < 0)
        return fail("smoe_close", rc);
    if (!ok || st.claims != 1) {
        fprintf(stderr, "consumer: wrong blob or stats (claims %llu)\n",
                (unsigned long long)st.claims);
        return 1;
    }
    remove(path);
    printf("consumer (C): libsmoe_stream %s, header %s: ok\n", smoe_version_string(),
           SMOE_VERSION_STRING);
    return 0;
}
