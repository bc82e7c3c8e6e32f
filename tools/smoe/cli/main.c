/* main.c - the smoe command-line tool: dispatch to subcommands. */
#include <stdio.h>
#include <string.h>

#include "smoe/smoe.h"
#include "tool.h"

static const struct {
    const char *name;
    tool_cmd_fn fn;
    const char *what;
} cmds[] = {
    {"gen", cmd_gen, "write a vault of random experts"},
    {"pack", cmd_pack, "turn a safetensors or GGUF checkpoint into a vault and a scout file"},
    {"index", cmd_index, "write an index vault pointing into a checkpoint (nothing copied)"},
    {"inspect", cmd_inspect, "show a vault's header, counts and layouts"},
    {"verify", cmd_verify, "check every blob's checksum"},
    {"read", cmd_read, "stream every blob once through the library"},
    {"budget", cmd_budget, "show how the ring would be sized on this machine"},
    {"trace-gen", cmd_trace_gen, "write a synthetic routing trace"},
    {"bench", cmd_bench, "replay a trace: the library against the page cache"},
    {"sim", cmd_sim, "replay traces through simulated eviction policies"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: smoe <command> [options]   (libsmoe_stream %s)\n\ncommands:\n",
            smoe_version_string());
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].what);
    fprintf(f, "\n'smoe <command> --help' describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("smoe %s\n", smoe_version_string());
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name))
            return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "smoe: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
