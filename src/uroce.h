/* SPDX-License-Identifier: MIT */
/*
 * The umbrella for the verbs front (src/verbs/): the device and every
 * module header below it.  Layers below the front include src/dev.h and
 * their own module header instead; see docs/architecture.md, "Layers".
 */
#ifndef UROCE_H
#define UROCE_H

#include "verbs/verbs.h"

#endif /* UROCE_H */
