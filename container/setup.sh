#!/bin/sh
# Prepares this checkout for `docker compose`: creates outputs/ and artifacts/ (mounted
# into the containers) as yours, and writes your user and group ids to container/.env,
# which compose reads, so that the image's user can write into them.
#
#   container/setup.sh            then: docker compose -f container/compose.yaml build
set -eu
cd "$(dirname "$0")"
uid=$(id -u)
gid=$(id -g)
if [ "$uid" -eq 0 ]; then
	echo "setup.sh: run it as the user who will own the results, not as root" >&2
	exit 1
fi
mkdir -p ../outputs ../artifacts
for d in ../outputs ../artifacts; do
	if [ ! -w "$d" ] || [ "$(stat -c %u "$d")" != "$uid" ]; then
		echo "setup.sh: $(cd "$d" && pwd) is not yours (owner uid $(stat -c %u "$d")); fix" \
			"it with: sudo chown -R $uid:$gid $(cd "$d" && pwd)" >&2
		exit 1
	fi
done
printf 'DDPTOK_UID=%s\nDDPTOK_GID=%s\n' "$uid" "$gid" > .env
echo "setup.sh: outputs/ and artifacts/ ready; container/.env: DDPTOK_UID=$uid DDPTOK_GID=$gid"
