/*
 * kernel.c: placeholder until the Jupyter kernel lands.
 */
#include <stdio.h>

#include "exe.h"

int xsa_kernel_main(lua_State *L, const char *connection_file)
{
    (void)L;
    (void)connection_file;
    fprintf(stderr, "xsa: this build has no Jupyter kernel\n");
    return 1;
}

int xsa_kernel_install(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "xsa: this build has no Jupyter kernel\n");
    return 1;
}
