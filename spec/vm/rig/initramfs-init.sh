#!/bin/sh
# /init of the rig's initramfs (busybox): load the few modules that reach the
# root disk, find the virtio disk whose serial is rig-root, mount it and hand
# over to the guest's init (init= on the kernel command line, default
# /sbin/rig-init). rig.ro=1 mounts the root read-only.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "/modules/$m" 2>/dev/null; done < /modules/order

next=/sbin/rig-init
opts=rw
for word in $(cat /proc/cmdline); do
    case $word in
        init=*) next=${word#init=} ;;
        rig.ro=1) opts=ro ;;
    esac
done

halt_now() { echo "rig-initramfs: $*"; ls /sys/block; echo o > /proc/sysrq-trigger; sleep 5; }

disk=
tries=0
while [ -z "$disk" ]; do
    for serial in /sys/block/vd*/serial; do
        [ -r "$serial" ] || continue
        if [ "$(cat "$serial")" = rig-root ]; then
            blk=${serial%/serial}
            disk=/dev/${blk##*/}
        fi
    done
    [ -n "$disk" ] && break
    tries=$((tries + 1))
    [ $tries -gt 400 ] && halt_now "no disk with serial rig-root"
    sleep 0.025
done
mount -t ext4 -o "$opts" "$disk" /root || halt_now "cannot mount $disk"
mount --move /dev /root/dev
umount /sys /proc
exec switch_root /root "$next"
