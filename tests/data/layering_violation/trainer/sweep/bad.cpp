#include "trainer/trainer.h"
