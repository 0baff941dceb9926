/*
 * cmd_parity: the parity command: the protocol's parity step on its own, dumping every
 * tensor it compared with --dump DIR.
 */
#include "cmd_parity.h"

#include "parity.h"
#include "step_parity.h"

int cmd_parity(struct app *a, struct err *e)
{
	struct parity_result res;
	int rc = parity_step(a, a->o.dump_dir, &res, e);
	parity_result_free(&res);
	return rc;
}
