/* version.c - runtime version queries. */
#include "smoe/smoe.h"

SMOE_API unsigned smoe_version_number(void)
{
    return SMOE_VERSION_NUMBER;
}

SMOE_API const char *smoe_version_string(void)
{
    return SMOE_VERSION_STRING;
}
