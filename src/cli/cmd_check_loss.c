/*
 * cmd_check_loss: the check-loss command: the protocol's step of that name, on its own.
 */
#include "cmd_check_loss.h"

#include "step_check_loss.h"

int cmd_check_loss(struct app *a, struct err *e)
{
	struct check_loss_result res;
	return check_loss_step(a, &res, e);
}
