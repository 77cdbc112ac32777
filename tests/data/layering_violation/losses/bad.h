#include "trainer/device.h"
