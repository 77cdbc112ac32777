#include <cli/commands.h>
