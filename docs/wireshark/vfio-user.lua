--[[
vfio-user dissector for Wireshark / tshark (Lua, Wireshark 4.0 or newer)
========================================================================

Decodes the vfio-user protocol (the protocol QEMU's vfio-user-pci speaks to
a device server) as found in this project's captures: one vfio-user
message per packet, wrapped in synthetic Ethernet/IPv4/TCP framing, with
the server on TCP port 50000 and clients on 40000+n, and a JSON packet
comment per packet (see fixtures/vfio-user/FORMAT.md). It also works on
any TCP stream that carries vfio-user bytes: several messages in one
segment, or one message over several segments, are handled through TCP
reassembly.

Usage
-----
  Run once, without installing:
    wireshark -X lua_script:docs/wireshark/vfio-user.lua capture.pcapng
    tshark    -X lua_script:docs/wireshark/vfio-user.lua -r capture.pcapng          # summary lines
    tshark    -X lua_script:docs/wireshark/vfio-user.lua -r capture.pcapng -V       # full decode
    tshark    -X lua_script:docs/wireshark/vfio-user.lua -r capture.pcapng \
              -Y 'vfio_user.command == 2' -T fields -e frame.number \
              -e vfio_user.msg_id -e vfio_user.dma_map.address -e vfio_user.dma_map.size

  Install for the current user (picked up by every later wireshark/tshark):
    mkdir -p ~/.local/lib/wireshark/plugins
    cp docs/wireshark/vfio-user.lua ~/.local/lib/wireshark/plugins/
  (Help > About Wireshark > Folders shows the "Personal Lua Plugins" folder
  of your installation.) Once installed, do not also pass -X lua_script:
  loading the file twice fails with "there cannot be two protocols ...".

Ports
-----
  - The dissector is registered on TCP port 50000 (preference
    "vfio-user > Server TCP port").
  - On other ports a strict heuristic recognises streams whose segments
    hold whole, well-formed vfio-user headers (preference "Try heuristic
    on other TCP ports"; on by default). If it does not trigger, use
    Analyze > Decode As... > TCP port > vfio-user, or on the command line
    `tshark -d tcp.port==12345,vfio-user ...`.

Filters and fields
------------------
  The protocol filter is `vfio-user`; fields are under `vfio_user.`, e.g.
  vfio_user.msg_id, vfio_user.command, vfio_user.msg_size, vfio_user.flags
  (.type .no_reply .error), vfio_user.error, vfio_user.direction,
  vfio_user.fd (from the packet comment), vfio_user.request_in /
  vfio_user.response_in, and per command vfio_user.version.*,
  vfio_user.dma_map.*, vfio_user.dma_unmap.*, vfio_user.device_info.*,
  vfio_user.region_info.*, vfio_user.cap.*, vfio_user.irq_info.*,
  vfio_user.set_irqs.*, vfio_user.region.*, vfio_user.dma.*,
  vfio_user.write_multi.*, vfio_user.feature.*, vfio_user.mig_data.*,
  vfio_user.data.  `tshark -G fields | grep vfio_user` lists them all.

The Info column shows one summary per message, for example
  c2s DMA_MAP cmd id=0x0001 addr=0x0 size=0x80000000 off=0x0 prot=RW
  s2c REGION_READ reply/ERR id=0xf00f err=22(EINVAL)

Malformed or truncated messages never raise Lua errors: every read is
length-checked and problems are reported as expert info
(`tshark ... -z expert`).
]]

local PLUGIN_VERSION = "1.0.0"
pcall(set_plugin_info, {
    version = PLUGIN_VERSION,
    description = "vfio-user protocol dissector",
    repository = "docs/wireshark/vfio-user.lua",
})

local proto = Proto("vfio-user", "vfio-user Protocol")

local DEFAULT_PORT = 50000
local HDR_LEN = 16
local MAX_MSG_SIZE = 64 * 1024 * 1024 -- larger headers are treated as garbage
local MAX_LIST_ITEMS = 4096            -- cap on array entries shown in the tree

---------------------------------------------------------------------------
-- Small helpers (no bitwise operators: they differ between Lua 5.2 and 5.4)
---------------------------------------------------------------------------

-- true when bit `mask` (a power of two) is set in the non-negative number v
local function has(v, mask)
    return math.floor(v / mask) % 2 == 1
end

local function hex64(u)
    local hi, lo = u:higher(), u:lower()
    if hi == 0 then return string.format("0x%x", lo) end
    return string.format("0x%x%08x", hi, lo)
end

local function name_or_q(tab, v)
    return tab[v] or "?"
end

local function hexbytes(range, max)
    if not range then return "" end
    local n = range:len()
    local shown = math.min(n, max or 16)
    if shown == 0 then return "" end
    local s = range:range(0, shown):bytes():tohex(true)
    if n > shown then s = s .. ".." end
    return s
end

---------------------------------------------------------------------------
-- Value tables
---------------------------------------------------------------------------

local CMD_NAMES = {
    [1] = "VERSION", [2] = "DMA_MAP", [3] = "DMA_UNMAP", [4] = "DEVICE_GET_INFO",
    [5] = "DEVICE_GET_REGION_INFO", [6] = "DEVICE_GET_REGION_IO_FDS",
    [7] = "DEVICE_GET_IRQ_INFO", [8] = "DEVICE_SET_IRQS", [9] = "REGION_READ",
    [10] = "REGION_WRITE", [11] = "DMA_READ", [12] = "DMA_WRITE",
    [13] = "DEVICE_RESET", [14] = "DIRTY_PAGES", [15] = "REGION_WRITE_MULTI",
    [16] = "DEVICE_FEATURE", [17] = "MIG_DATA_READ", [18] = "MIG_DATA_WRITE",
}

local TYPE_NAMES = { [0] = "Command", [1] = "Reply" }

-- Linux errno values (x86_64/generic)
local ERRNO_NAMES = {
    [0] = "OK", [1] = "EPERM", [2] = "ENOENT", [3] = "ESRCH", [4] = "EINTR",
    [5] = "EIO", [6] = "ENXIO", [7] = "E2BIG", [8] = "ENOEXEC", [9] = "EBADF",
    [10] = "ECHILD", [11] = "EAGAIN", [12] = "ENOMEM", [13] = "EACCES",
    [14] = "EFAULT", [16] = "EBUSY", [17] = "EEXIST", [18] = "EXDEV",
    [19] = "ENODEV", [20] = "ENOTDIR", [21] = "EISDIR", [22] = "EINVAL",
    [23] = "ENFILE", [24] = "EMFILE", [25] = "ENOTTY", [27] = "EFBIG",
    [28] = "ENOSPC", [29] = "ESPIPE", [30] = "EROFS", [32] = "EPIPE",
    [33] = "EDOM", [34] = "ERANGE", [35] = "EDEADLK", [36] = "ENAMETOOLONG",
    [38] = "ENOSYS", [42] = "ENOMSG", [61] = "ENODATA", [62] = "ETIME",
    [71] = "EPROTO", [74] = "EBADMSG", [75] = "EOVERFLOW", [84] = "EILSEQ",
    [90] = "EMSGSIZE", [93] = "EPROTONOSUPPORT", [95] = "EOPNOTSUPP",
    [104] = "ECONNRESET", [105] = "ENOBUFS", [107] = "ENOTCONN",
    [108] = "ESHUTDOWN", [110] = "ETIMEDOUT", [111] = "ECONNREFUSED",
    [114] = "EALREADY", [115] = "EINPROGRESS", [125] = "ECANCELED",
}

local REGION_NAMES = {
    [0] = "BAR0", [1] = "BAR1", [2] = "BAR2", [3] = "BAR3", [4] = "BAR4",
    [5] = "BAR5", [6] = "ROM", [7] = "CONFIG", [8] = "VGA",
}

local IRQ_NAMES = { [0] = "INTX", [1] = "MSI", [2] = "MSIX", [3] = "ERR", [4] = "REQ" }

local CAP_NAMES = { [1] = "SPARSE_MMAP", [2] = "TYPE", [3] = "MSIX_MAPPABLE" }

local IOFD_TYPE_NAMES = { [0] = "ioeventfd", [1] = "ioregionfd", [2] = "shadow ioeventfd" }

local FEATURE_NAMES = {
    [0] = "PCI_VF_TOKEN", [1] = "MIGRATION", [2] = "MIG_DEVICE_STATE",
    [3] = "LOW_POWER_ENTRY", [4] = "LOW_POWER_ENTRY_WITH_WAKEUP",
    [5] = "LOW_POWER_EXIT", [6] = "DMA_LOGGING_START", [7] = "DMA_LOGGING_STOP",
    [8] = "DMA_LOGGING_REPORT", [9] = "MIG_DATA_SIZE",
}

local MIG_STATE_NAMES = {
    [0] = "ERROR", [1] = "STOP", [2] = "RUNNING", [3] = "STOP_COPY",
    [4] = "RESUMING", [5] = "RUNNING_P2P", [6] = "PRE_COPY", [7] = "PRE_COPY_P2P",
}

---------------------------------------------------------------------------
-- Fields
---------------------------------------------------------------------------

local F = {}
local function field(key, f) F[key] = f end

-- header
field("msg_id", ProtoField.uint16("vfio_user.msg_id", "Message ID", base.HEX))
field("command", ProtoField.uint16("vfio_user.command", "Command", base.DEC, CMD_NAMES))
field("msg_size", ProtoField.uint32("vfio_user.msg_size", "Message size", base.DEC))
field("flags", ProtoField.uint32("vfio_user.flags", "Flags", base.HEX))
field("flags_type", ProtoField.uint32("vfio_user.flags.type", "Type", base.DEC, TYPE_NAMES, 0x0000000f))
field("flags_no_reply", ProtoField.bool("vfio_user.flags.no_reply", "NO_REPLY", 32, nil, 0x00000010))
field("flags_error", ProtoField.bool("vfio_user.flags.error", "ERROR", 32, nil, 0x00000020))
field("flags_reserved", ProtoField.uint32("vfio_user.flags.reserved", "Reserved bits", base.HEX, nil, 0xffffffc0))
field("error", ProtoField.uint32("vfio_user.error", "Error (errno)", base.DEC, ERRNO_NAMES))
field("direction", ProtoField.string("vfio_user.direction", "Direction"))
field("request_in", ProtoField.framenum("vfio_user.request_in", "Request in frame", base.NONE, frametype.REQUEST))
field("response_in", ProtoField.framenum("vfio_user.response_in", "Response in frame", base.NONE, frametype.RESPONSE))
field("response_time", ProtoField.relative_time("vfio_user.response_time", "Time since request"))
field("argsz", ProtoField.uint32("vfio_user.argsz", "argsz", base.DEC))
field("data", ProtoField.bytes("vfio_user.data", "Data"))
field("padding", ProtoField.bytes("vfio_user.padding", "Padding / unused bytes"))
field("trailing", ProtoField.bytes("vfio_user.trailing", "Unexpected trailing bytes"))
field("raw", ProtoField.bytes("vfio_user.raw", "Unparsed bytes"))

-- from the packet comment written by the recorder
field("cap_dir", ProtoField.string("vfio_user.capture.dir", "Recorded direction"))
field("cap_conn", ProtoField.uint32("vfio_user.capture.conn", "Recorded connection", base.DEC))
field("cap_name", ProtoField.string("vfio_user.capture.name", "Recorded command name"))
field("cap_seg", ProtoField.uint32("vfio_user.capture.seg", "Segment", base.DEC))
field("cap_nseg", ProtoField.uint32("vfio_user.capture.nseg", "Segments", base.DEC))
field("cap_incomplete", ProtoField.bool("vfio_user.capture.incomplete", "Incomplete (connection ended mid-message)"))
field("cap_raw", ProtoField.bool("vfio_user.capture.raw", "Raw (recorder stopped parsing)"))
field("fd_count", ProtoField.uint32("vfio_user.fd_count", "File descriptors", base.DEC))
field("fd", ProtoField.string("vfio_user.fd", "File descriptor"))
field("fd_kind", ProtoField.string("vfio_user.fd.kind", "Kind"))
field("fd_size", ProtoField.uint64("vfio_user.fd.size", "Size", base.DEC))
field("fd_name", ProtoField.string("vfio_user.fd.name", "Name / path"))

-- VERSION
field("ver_major", ProtoField.uint16("vfio_user.version.major", "Major", base.DEC))
field("ver_minor", ProtoField.uint16("vfio_user.version.minor", "Minor", base.DEC))
field("ver_json", ProtoField.string("vfio_user.version.json", "Capabilities (JSON)"))

-- DMA_MAP
field("map_flags", ProtoField.uint32("vfio_user.dma_map.flags", "Flags", base.HEX))
field("map_read", ProtoField.bool("vfio_user.dma_map.flags.read", "READ", 32, nil, 0x1))
field("map_write", ProtoField.bool("vfio_user.dma_map.flags.write", "WRITE", 32, nil, 0x2))
field("map_mmap", ProtoField.bool("vfio_user.dma_map.flags.mmap", "MMAP (libvfio-user extension)", 32, nil, 0x4))
field("map_fileio", ProtoField.bool("vfio_user.dma_map.flags.file_io", "FILE_IO (libvfio-user extension)", 32, nil, 0x8))
field("map_offset", ProtoField.uint64("vfio_user.dma_map.offset", "File offset", base.HEX))
field("map_addr", ProtoField.uint64("vfio_user.dma_map.address", "Address (IOVA)", base.HEX))
field("map_size", ProtoField.uint64("vfio_user.dma_map.size", "Size", base.HEX))

-- DMA_UNMAP
field("unmap_flags", ProtoField.uint32("vfio_user.dma_unmap.flags", "Flags", base.HEX))
field("unmap_dirty", ProtoField.bool("vfio_user.dma_unmap.flags.get_dirty_bitmap", "GET_DIRTY_BITMAP", 32, nil, 0x1))
field("unmap_all", ProtoField.bool("vfio_user.dma_unmap.flags.unmap_all", "UNMAP_ALL", 32, nil, 0x2))
field("unmap_addr", ProtoField.uint64("vfio_user.dma_unmap.address", "Address (IOVA)", base.HEX))
field("unmap_size", ProtoField.uint64("vfio_user.dma_unmap.size", "Size", base.HEX))
field("unmap_bm_pgsize", ProtoField.uint64("vfio_user.dma_unmap.bitmap.pgsize", "Bitmap page size", base.DEC))
field("unmap_bm_size", ProtoField.uint64("vfio_user.dma_unmap.bitmap.size", "Bitmap size", base.DEC))
field("unmap_bm_data", ProtoField.bytes("vfio_user.dma_unmap.bitmap.data", "Bitmap"))

-- DEVICE_GET_INFO
field("dev_flags", ProtoField.uint32("vfio_user.device_info.flags", "Flags", base.HEX))
field("dev_reset", ProtoField.bool("vfio_user.device_info.flags.reset", "RESET", 32, nil, 0x1))
field("dev_pci", ProtoField.bool("vfio_user.device_info.flags.pci", "PCI", 32, nil, 0x2))
field("dev_caps", ProtoField.bool("vfio_user.device_info.flags.caps", "CAPS", 32, nil, 0x80))
field("dev_nregions", ProtoField.uint32("vfio_user.device_info.num_regions", "Number of regions", base.DEC))
field("dev_nirqs", ProtoField.uint32("vfio_user.device_info.num_irqs", "Number of IRQ types", base.DEC))

-- DEVICE_GET_REGION_INFO and capabilities
field("ri_flags", ProtoField.uint32("vfio_user.region_info.flags", "Flags", base.HEX))
field("ri_read", ProtoField.bool("vfio_user.region_info.flags.read", "READ", 32, nil, 0x1))
field("ri_write", ProtoField.bool("vfio_user.region_info.flags.write", "WRITE", 32, nil, 0x2))
field("ri_mmap", ProtoField.bool("vfio_user.region_info.flags.mmap", "MMAP", 32, nil, 0x4))
field("ri_caps", ProtoField.bool("vfio_user.region_info.flags.caps", "CAPS", 32, nil, 0x8))
field("ri_index", ProtoField.uint32("vfio_user.region_info.index", "Region index", base.DEC, REGION_NAMES))
field("ri_cap_offset", ProtoField.uint32("vfio_user.region_info.cap_offset", "Capability offset", base.DEC))
field("ri_size", ProtoField.uint64("vfio_user.region_info.size", "Region size", base.HEX))
field("ri_offset", ProtoField.uint64("vfio_user.region_info.offset", "Region mmap offset", base.HEX))
field("cap_id", ProtoField.uint16("vfio_user.cap.id", "Capability ID", base.DEC, CAP_NAMES))
field("cap_version", ProtoField.uint16("vfio_user.cap.version", "Capability version", base.DEC))
field("cap_next", ProtoField.uint32("vfio_user.cap.next", "Next capability offset", base.DEC))
field("cap_data", ProtoField.bytes("vfio_user.cap.data", "Capability data"))
field("sparse_nr", ProtoField.uint32("vfio_user.cap.sparse.nr_areas", "Number of areas", base.DEC))
field("sparse_reserved", ProtoField.uint32("vfio_user.cap.sparse.reserved", "Reserved", base.HEX))
field("sparse_off", ProtoField.uint64("vfio_user.cap.sparse.area.offset", "Area offset", base.HEX))
field("sparse_size", ProtoField.uint64("vfio_user.cap.sparse.area.size", "Area size", base.HEX))
field("cap_type", ProtoField.uint32("vfio_user.cap.type.type", "Region type", base.HEX))
field("cap_subtype", ProtoField.uint32("vfio_user.cap.type.subtype", "Region subtype", base.HEX))

-- DEVICE_GET_REGION_IO_FDS
field("iofd_flags", ProtoField.uint32("vfio_user.io_fds.flags", "Flags", base.HEX))
field("iofd_index", ProtoField.uint32("vfio_user.io_fds.index", "Region index", base.DEC, REGION_NAMES))
field("iofd_count", ProtoField.uint32("vfio_user.io_fds.count", "Sub-region count", base.DEC))
field("iofd_e_offset", ProtoField.uint64("vfio_user.io_fds.entry.offset", "Offset", base.HEX))
field("iofd_e_size", ProtoField.uint64("vfio_user.io_fds.entry.size", "Size", base.DEC))
field("iofd_e_fd_index", ProtoField.uint32("vfio_user.io_fds.entry.fd_index", "fd index", base.DEC))
field("iofd_e_type", ProtoField.uint32("vfio_user.io_fds.entry.type", "Type", base.DEC, IOFD_TYPE_NAMES))
field("iofd_e_flags", ProtoField.uint32("vfio_user.io_fds.entry.flags", "Flags", base.HEX))
field("iofd_e_rest", ProtoField.bytes("vfio_user.io_fds.entry.rest", "Type-specific fields"))

-- DEVICE_GET_IRQ_INFO
field("irq_flags", ProtoField.uint32("vfio_user.irq_info.flags", "Flags", base.HEX))
field("irq_eventfd", ProtoField.bool("vfio_user.irq_info.flags.eventfd", "EVENTFD", 32, nil, 0x1))
field("irq_maskable", ProtoField.bool("vfio_user.irq_info.flags.maskable", "MASKABLE", 32, nil, 0x2))
field("irq_automasked", ProtoField.bool("vfio_user.irq_info.flags.automasked", "AUTOMASKED", 32, nil, 0x4))
field("irq_noresize", ProtoField.bool("vfio_user.irq_info.flags.noresize", "NORESIZE", 32, nil, 0x8))
field("irq_index", ProtoField.uint32("vfio_user.irq_info.index", "IRQ index", base.DEC, IRQ_NAMES))
field("irq_count", ProtoField.uint32("vfio_user.irq_info.count", "Count", base.DEC))

-- DEVICE_SET_IRQS
field("si_flags", ProtoField.uint32("vfio_user.set_irqs.flags", "Flags", base.HEX))
field("si_none", ProtoField.bool("vfio_user.set_irqs.flags.data_none", "DATA_NONE", 32, nil, 0x01))
field("si_bool", ProtoField.bool("vfio_user.set_irqs.flags.data_bool", "DATA_BOOL", 32, nil, 0x02))
field("si_eventfd", ProtoField.bool("vfio_user.set_irqs.flags.data_eventfd", "DATA_EVENTFD", 32, nil, 0x04))
field("si_mask", ProtoField.bool("vfio_user.set_irqs.flags.action_mask", "ACTION_MASK", 32, nil, 0x08))
field("si_unmask", ProtoField.bool("vfio_user.set_irqs.flags.action_unmask", "ACTION_UNMASK", 32, nil, 0x10))
field("si_trigger", ProtoField.bool("vfio_user.set_irqs.flags.action_trigger", "ACTION_TRIGGER", 32, nil, 0x20))
field("si_index", ProtoField.uint32("vfio_user.set_irqs.index", "IRQ index", base.DEC, IRQ_NAMES))
field("si_start", ProtoField.uint32("vfio_user.set_irqs.start", "Start", base.DEC))
field("si_count", ProtoField.uint32("vfio_user.set_irqs.count", "Count", base.DEC))
field("si_boolval", ProtoField.uint8("vfio_user.set_irqs.bool", "Bool", base.DEC))

-- REGION_READ / REGION_WRITE
field("rg_offset", ProtoField.uint64("vfio_user.region.offset", "Offset", base.HEX))
field("rg_index", ProtoField.uint32("vfio_user.region.index", "Region", base.DEC, REGION_NAMES))
field("rg_count", ProtoField.uint32("vfio_user.region.count", "Count", base.DEC))

-- DMA_READ / DMA_WRITE
field("dma_addr", ProtoField.uint64("vfio_user.dma.address", "Address", base.HEX))
field("dma_count", ProtoField.uint64("vfio_user.dma.count", "Count", base.DEC))
field("dma_count32", ProtoField.uint32("vfio_user.dma.count32", "Count (u32, QEMU layout)", base.DEC))

-- REGION_WRITE_MULTI
field("wm_cnt", ProtoField.uint64("vfio_user.write_multi.wr_cnt", "Write count", base.DEC))
field("wm_offset", ProtoField.uint64("vfio_user.write_multi.offset", "Offset", base.HEX))
field("wm_region", ProtoField.uint32("vfio_user.write_multi.region", "Region", base.DEC, REGION_NAMES))
field("wm_count", ProtoField.uint32("vfio_user.write_multi.count", "Count", base.DEC))
field("wm_data", ProtoField.bytes("vfio_user.write_multi.data", "Data (8-byte slot)"))

-- DEVICE_FEATURE
field("ft_flags", ProtoField.uint32("vfio_user.feature.flags", "Flags", base.HEX))
field("ft_index", ProtoField.uint32("vfio_user.feature.index", "Feature", base.DEC, FEATURE_NAMES, 0x0000ffff))
field("ft_get", ProtoField.bool("vfio_user.feature.get", "GET", 32, nil, 0x00010000))
field("ft_set", ProtoField.bool("vfio_user.feature.set", "SET", 32, nil, 0x00020000))
field("ft_probe", ProtoField.bool("vfio_user.feature.probe", "PROBE", 32, nil, 0x00040000))
field("ft_mig_flags", ProtoField.uint64("vfio_user.feature.migration_flags", "Migration flags", base.HEX))
field("ft_state", ProtoField.uint32("vfio_user.feature.device_state", "Device state", base.DEC, MIG_STATE_NAMES))
field("ft_data_fd", ProtoField.int32("vfio_user.feature.data_fd", "data_fd", base.DEC))
field("ft_page_size", ProtoField.uint64("vfio_user.feature.page_size", "Page size", base.DEC))
field("ft_num_ranges", ProtoField.uint32("vfio_user.feature.num_ranges", "Number of ranges", base.DEC))
field("ft_reserved", ProtoField.uint32("vfio_user.feature.reserved", "Reserved", base.HEX))
field("ft_iova", ProtoField.uint64("vfio_user.feature.iova", "IOVA", base.HEX))
field("ft_length", ProtoField.uint64("vfio_user.feature.length", "Length", base.HEX))
field("ft_bitmap", ProtoField.bytes("vfio_user.feature.bitmap", "Dirty bitmap"))
field("ft_stop_copy_len", ProtoField.uint64("vfio_user.feature.stop_copy_length", "Stop-copy length", base.DEC))

-- MIG_DATA_READ / MIG_DATA_WRITE
field("mig_size", ProtoField.uint32("vfio_user.mig_data.size", "Size", base.DEC))

local field_list = {}
for _, f in pairs(F) do field_list[#field_list + 1] = f end
proto.fields = field_list

-- expert info
local E = {
    truncated = ProtoExpert.new("vfio_user.expert.truncated", "Message truncated",
        expert.group.MALFORMED, expert.severity.ERROR),
    bad_size = ProtoExpert.new("vfio_user.expert.bad_size", "Invalid msg_size",
        expert.group.MALFORMED, expert.severity.ERROR),
    error_reply = ProtoExpert.new("vfio_user.expert.error_reply", "Error reply",
        expert.group.RESPONSE_CODE, expert.severity.WARN),
    unknown_cmd = ProtoExpert.new("vfio_user.expert.unknown_command", "Unknown command",
        expert.group.UNDECODED, expert.severity.WARN),
    bad_flags = ProtoExpert.new("vfio_user.expert.bad_flags", "Unusual header flags or error field",
        expert.group.PROTOCOL, expert.severity.WARN),
    trailing = ProtoExpert.new("vfio_user.expert.trailing", "Unexpected bytes after the payload",
        expert.group.PROTOCOL, expert.severity.NOTE),
    malformed = ProtoExpert.new("vfio_user.expert.malformed", "Malformed payload",
        expert.group.MALFORMED, expert.severity.WARN),
    note = ProtoExpert.new("vfio_user.expert.note", "Protocol note",
        expert.group.PROTOCOL, expert.severity.NOTE),
    comment = ProtoExpert.new("vfio_user.expert.comment", "Capture comment note",
        expert.group.COMMENTS_GROUP, expert.severity.NOTE),
    unmatched = ProtoExpert.new("vfio_user.expert.unmatched", "Reply without a request in this capture",
        expert.group.SEQUENCE, expert.severity.NOTE),
}
proto.experts = { E.truncated, E.bad_size, E.error_reply, E.unknown_cmd, E.bad_flags,
    E.trailing, E.malformed, E.note, E.comment, E.unmatched }

-- preferences
proto.prefs.port = Pref.uint("Server TCP port", DEFAULT_PORT,
    "TCP port of the vfio-user server (the recorder uses 50000)")
proto.prefs.heuristic = Pref.bool("Try heuristic on other TCP ports", true,
    "Recognise vfio-user on TCP ports other than the server port by checking message headers")
proto.prefs.show_comment = Pref.bool("Decode the recorder's packet comment", true,
    "Show direction, connection and passed file descriptors from the JSON packet comment")

-- fields of other protocols
local function try_field(name)
    local ok, f = pcall(Field.new, name)
    if ok then return f end
    return nil
end
local fe_comment = try_field("frame.comment") or try_field("pkt_comment")
local fe_stream = try_field("tcp.stream")

---------------------------------------------------------------------------
-- A tiny JSON reader, enough for the recorder's comments
---------------------------------------------------------------------------

local JSON_NULL = setmetatable({}, { __tostring = function() return "null" end })

local function utf8_char(cp)
    if cp < 0x80 then return string.char(cp) end
    if cp < 0x800 then
        return string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40)
    end
    return string.char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local function json_decode(s)
    local pos = 1
    local escapes = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }
    local depth = 0

    local function skip_ws()
        pos = s:find("[^ \t\r\n]", pos) or (#s + 1)
    end

    local function read_string()
        pos = pos + 1 -- opening quote
        local out = {}
        while true do
            local j = s:find('["\\]', pos)
            if not j then error("unterminated string") end
            out[#out + 1] = s:sub(pos, j - 1)
            if s:sub(j, j) == '"' then
                pos = j + 1
                return table.concat(out)
            end
            local e = s:sub(j + 1, j + 1)
            if escapes[e] then
                out[#out + 1] = escapes[e]
                pos = j + 2
            elseif e == "u" then
                local cp = tonumber(s:sub(j + 2, j + 5), 16)
                if not cp then error("bad \\u escape") end
                out[#out + 1] = utf8_char(cp)
                pos = j + 6
            else
                error("bad escape")
            end
        end
    end

    local read_value
    local function read_object()
        pos = pos + 1
        local obj = {}
        skip_ws()
        if s:sub(pos, pos) == "}" then pos = pos + 1; return obj end
        while true do
            skip_ws()
            if s:sub(pos, pos) ~= '"' then error("expected key") end
            local k = read_string()
            skip_ws()
            if s:sub(pos, pos) ~= ":" then error("expected ':'") end
            pos = pos + 1
            obj[k] = read_value()
            skip_ws()
            local c = s:sub(pos, pos)
            pos = pos + 1
            if c == "}" then return obj end
            if c ~= "," then error("expected ',' or '}'") end
        end
    end

    local function read_array()
        pos = pos + 1
        local arr = {}
        skip_ws()
        if s:sub(pos, pos) == "]" then pos = pos + 1; return arr end
        while true do
            arr[#arr + 1] = read_value()
            skip_ws()
            local c = s:sub(pos, pos)
            pos = pos + 1
            if c == "]" then return arr end
            if c ~= "," then error("expected ',' or ']'") end
        end
    end

    function read_value()
        skip_ws()
        depth = depth + 1
        if depth > 64 then error("too deep") end
        local c = s:sub(pos, pos)
        local v
        if c == "{" then v = read_object()
        elseif c == "[" then v = read_array()
        elseif c == '"' then v = read_string()
        elseif s:find("^true", pos) then pos = pos + 4; v = true
        elseif s:find("^false", pos) then pos = pos + 5; v = false
        elseif s:find("^null", pos) then pos = pos + 4; v = JSON_NULL
        else
            local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
            if not num or num == "" or not tonumber(num) then error("unexpected character") end
            pos = pos + #num
            v = tonumber(num)
        end
        depth = depth - 1
        return v
    end

    local v = read_value()
    skip_ws()
    if pos <= #s then error("trailing characters") end
    return v
end

---------------------------------------------------------------------------
-- Per-capture state (reset whenever a file is (re)loaded)
---------------------------------------------------------------------------

local comment_cache = {}   -- frame number -> parsed comment (or false)
local effective_cmt = {}   -- frame number -> comment that describes the message(s) ending in it
local seg_pending = {}     -- stream|dir -> comment of seg 0 of a message being reassembled
local pending_reqs = {}    -- stream|id|cmd|reqdir -> FIFO of { frame, ts }
local links = {}           -- frame:index -> { req = frame, resp = frame, delta = seconds }

function proto.init()
    comment_cache = {}
    effective_cmt = {}
    seg_pending = {}
    pending_reqs = {}
    links = {}
end

local function packet_comment(pinfo)
    local cached = comment_cache[pinfo.number]
    if cached ~= nil then return cached or nil end
    local result = false
    if fe_comment then
        local ok, infos = pcall(function() return { fe_comment() } end)
        if ok then
            for _, fi in ipairs(infos) do
                local okv, text = pcall(function() return fi.value end)
                if okv and type(text) == "string" and text:sub(1, 1) == "{" then
                    local okj, obj = pcall(json_decode, text)
                    if okj and type(obj) == "table" then
                        result = obj
                        break
                    end
                end
            end
        end
    end
    comment_cache[pinfo.number] = result
    return result or nil
end

local function stream_id()
    if fe_stream then
        local ok, fi = pcall(fe_stream)
        if ok and fi then
            local okv, v = pcall(function() return fi.value end)
            if okv and v then return tostring(v) end
        end
    end
    return "?"
end

---------------------------------------------------------------------------
-- Bounded reader over one message
---------------------------------------------------------------------------

local Cursor = {}
Cursor.__index = Cursor

local function cursor(tvb, tree, pos, stop, pinfo)
    return setmetatable({ tvb = tvb, tree = tree, pos = pos, stop = stop, ok = true, pinfo = pinfo }, Cursor)
end

function Cursor:left()
    return self.stop - self.pos
end

function Cursor:truncated(tree, what, need)
    self.ok = false
    tree = tree or self.tree
    tree:add_proto_expert_info(E.truncated, string.format(
        "Truncated: %s needs %d bytes at message offset %d, only %d left",
        what or "field", need, self.pos, math.max(0, self.stop - self.pos)))
end

-- Take n bytes; add them with `f` (little-endian) if given. Returns range, item.
function Cursor:take(n, f, tree, what)
    if not self.ok then return nil end
    tree = tree or self.tree
    if self.pos + n > self.stop then
        self:truncated(tree, what, n)
        return nil
    end
    local r = self.tvb:range(self.pos, n)
    self.pos = self.pos + n
    local item
    if f then item = tree:add_le(f, r) end
    return r, item
end

function Cursor:u16(f, tree, what)
    local r, item = self:take(2, f, tree, what)
    if r then return r:le_uint(), item, r end
end

function Cursor:u32(f, tree, what)
    local r, item = self:take(4, f, tree, what)
    if r then return r:le_uint(), item, r end
end

function Cursor:u64(f, tree, what)
    local r, item = self:take(8, f, tree, what)
    if r then return r:le_uint64(), item, r end
end

-- A u32 flags word with bit sub-fields.
function Cursor:flags32(f, bits, tree, what)
    local v, item, r = self:u32(f, tree, what)
    if v and item then
        for _, b in ipairs(bits) do item:add_le(b, r) end
    end
    return v
end

-- `n` data bytes (n may be a number or UInt64); adds what is there and reports truncation.
function Cursor:data(n, f, tree, what)
    if not self.ok then return nil end
    tree = tree or self.tree
    local want = n
    if type(n) ~= "number" then
        if n:higher() ~= 0 then want = math.huge else want = n:lower() end
    end
    local avail = self.stop - self.pos
    local take = math.min(want, avail)
    local r
    if take > 0 then
        r = self.tvb:range(self.pos, take)
        tree:add(f or F.data, r)
        self.pos = self.pos + take
    end
    if want > avail then
        self.ok = false
        tree:add_proto_expert_info(E.truncated, string.format(
            "Truncated: %s announces %s bytes, only %d present", what or "data",
            want == math.huge and tostring(n) or tostring(want), avail))
    end
    return r
end

-- Everything left, as `f` (default: data). Returns range or nil.
function Cursor:rest(f, tree)
    if not self.ok then return nil end
    local avail = self.stop - self.pos
    if avail <= 0 then return nil end
    local r = self.tvb:range(self.pos, avail)
    self.pos = self.stop;
    (tree or self.tree):add(f or F.data, r)
    return r
end

-- Bytes after a fully decoded payload.
function Cursor:finish(tree)
    if not self.ok then return end
    local avail = self.stop - self.pos
    if avail > 0 then
        tree = tree or self.tree
        local r = self.tvb:range(self.pos, avail)
        local item = tree:add(F.trailing, r)
        item:add_proto_expert_info(E.trailing, string.format("%d unexpected bytes after the payload", avail))
        self.pos = self.stop
    end
end

---------------------------------------------------------------------------
-- Per-command payload decoders.
-- Each gets (c, ctx) where c is a Cursor at the payload and ctx holds
-- cmd, is_reply, tree, pinfo, msg_size; returns a summary string.
---------------------------------------------------------------------------

local function region_label(idx)
    return string.format("%d(%s)", idx, name_or_q(REGION_NAMES, idx))
end

local function irq_label(idx)
    return string.format("%d(%s)", idx, name_or_q(IRQ_NAMES, idx))
end

local function flag_letters(v, letters)
    local s = ""
    for _, l in ipairs(letters) do
        if has(v, l[1]) then s = s .. l[2] end
    end
    if s == "" then s = "0" end
    return s
end

local decoders = {}

decoders[1] = function(c, ctx) -- VERSION
    local major = c:u16(F.ver_major, nil, "major")
    local minor = c:u16(F.ver_minor, nil, "minor")
    if not minor then return "" end
    local summary = string.format("v%d.%d", major, minor)
    local left = c:left()
    if left > 0 then
        local r = c.tvb:range(c.pos, left)
        local raw = r:raw()
        local nul = raw:find("\0", 1, true)
        local text = nul and raw:sub(1, nul - 1) or raw
        local item = c.tree:add(F.ver_json, r, text)
        if not nul then
            item:add_proto_expert_info(E.note, "JSON text is not NUL-terminated")
        elseif nul < #raw then
            item:add_proto_expert_info(E.trailing, string.format("%d bytes after the JSON's NUL", #raw - nul))
        end
        c.pos = c.stop
        local short = text:gsub("%s+", " ")
        if #short > 100 then short = short:sub(1, 97) .. "..." end
        summary = summary .. " " .. short
    end
    return summary
end

decoders[2] = function(c, ctx) -- DMA_MAP
    if ctx.is_reply then return "" end
    local argsz = c:u32(F.argsz, nil, "argsz")
    local flags = c:flags32(F.map_flags, { F.map_read, F.map_write, F.map_mmap, F.map_fileio }, nil, "flags")
    local off = c:u64(F.map_offset, nil, "offset")
    local addr = c:u64(F.map_addr, nil, "address")
    local size = c:u64(F.map_size, nil, "size")
    if not size then return "" end
    if argsz ~= 32 then
        c.tree:add_proto_expert_info(E.note, string.format("DMA_MAP argsz is %d (expected 32)", argsz))
    end
    return string.format("addr=%s size=%s off=%s prot=%s", hex64(addr), hex64(size), hex64(off),
        flag_letters(flags, { { 1, "R" }, { 2, "W" } }))
end

decoders[3] = function(c, ctx) -- DMA_UNMAP (request and reply share the layout)
    c:u32(F.argsz, nil, "argsz")
    local flags = c:flags32(F.unmap_flags, { F.unmap_dirty, F.unmap_all }, nil, "flags")
    local addr = c:u64(F.unmap_addr, nil, "address")
    local size = c:u64(F.unmap_size, nil, "size")
    if not size then return "" end
    if has(flags, 1) and c:left() > 0 then
        local bt = c.tree:add(proto, c.tvb:range(c.pos, c:left()), "Dirty bitmap")
        c:u64(F.unmap_bm_pgsize, bt, "bitmap pgsize")
        local bsz = c:u64(F.unmap_bm_size, bt, "bitmap size")
        if bsz then c:data(bsz, F.unmap_bm_data, bt, "bitmap") end
    end
    return string.format("addr=%s size=%s flags=0x%x", hex64(addr), hex64(size), flags)
end

decoders[4] = function(c, ctx) -- DEVICE_GET_INFO
    local argsz = c:u32(F.argsz, nil, "argsz")
    local flags = c:flags32(F.dev_flags, { F.dev_reset, F.dev_pci, F.dev_caps }, nil, "flags")
    local nreg = c:u32(F.dev_nregions, nil, "num_regions")
    local nirq = c:u32(F.dev_nirqs, nil, "num_irqs")
    if not nirq then return argsz and string.format("argsz=%d", argsz) or "" end
    if ctx.is_reply then
        return string.format("flags=0x%x regions=%d irqs=%d", flags, nreg, nirq)
    end
    return string.format("argsz=%d", argsz)
end

local function dissect_caps(c, ctx, first)
    -- capability offsets are relative to the start of the 32-byte region-info struct
    local base = HDR_LEN
    local next_off = first
    local seen = {}
    local names = {}
    local guard = 0
    while next_off ~= 0 do
        guard = guard + 1
        if guard > 64 then
            c.tree:add_proto_expert_info(E.malformed, "More than 64 capabilities; stopped")
            break
        end
        if seen[next_off] then
            c.tree:add_proto_expert_info(E.malformed, string.format("Capability chain loops back to offset %d", next_off))
            break
        end
        seen[next_off] = true
        local at = base + next_off
        if next_off < 32 or at + 8 > c.stop then
            c.tree:add_proto_expert_info(E.malformed, string.format(
                "Capability offset %d is outside the payload (%d bytes of region info)", next_off, c.stop - base))
            break
        end
        -- the capability extends to the next one (if after it) or to the end of the message
        local id = c.tvb:range(at, 2):le_uint()
        local nxt = c.tvb:range(at + 4, 4):le_uint()
        local cap_end = c.stop
        if nxt > next_off and base + nxt <= c.stop then cap_end = base + nxt end
        local ct = c.tree:add(proto, c.tvb:range(at, cap_end - at),
            string.format("Capability: %s (id %d) at offset %d", name_or_q(CAP_NAMES, id), id, next_off))
        local cc = cursor(c.tvb, ct, at, cap_end, c.pinfo)
        cc:u16(F.cap_id, nil, "capability id")
        cc:u16(F.cap_version, nil, "capability version")
        cc:u32(F.cap_next, nil, "next")
        if id == 1 then
            local nr = cc:u32(F.sparse_nr, nil, "nr_areas")
            cc:u32(F.sparse_reserved, nil, "reserved")
            local areas = {}
            if nr then
                for i = 0, math.min(nr, MAX_LIST_ITEMS) - 1 do
                    if not cc.ok then break end
                    if cc:left() < 16 then
                        cc:truncated(ct, string.format("sparse area %d of %d", i, nr), 16)
                        break
                    end
                    local at_area = cc.tvb:range(cc.pos, 16)
                    local at_item = ct:add(proto, at_area, string.format("Area %d", i))
                    local o = cc:u64(F.sparse_off, at_item, "area offset")
                    local s = cc:u64(F.sparse_size, at_item, "area size")
                    if o and s then
                        at_item:append_text(string.format(": offset %s, size %s", hex64(o), hex64(s)))
                        areas[#areas + 1] = hex64(o) .. "+" .. hex64(s)
                    end
                end
            end
            names[#names + 1] = string.format("SPARSE_MMAP[%s]", table.concat(areas, ","))
        elseif id == 2 then
            local t = cc:u32(F.cap_type, nil, "type")
            local st = cc:u32(F.cap_subtype, nil, "subtype")
            names[#names + 1] = (t and st) and string.format("TYPE(%x/%x)", t, st) or "TYPE"
        else
            names[#names + 1] = name_or_q(CAP_NAMES, id)
        end
        if cc.ok and cc:left() > 0 then
            cc:rest(F.cap_data, ct)
        end
        next_off = nxt
    end
    return table.concat(names, " ")
end

decoders[5] = function(c, ctx) -- DEVICE_GET_REGION_INFO
    local argsz = c:u32(F.argsz, nil, "argsz")
    local flags = c:flags32(F.ri_flags, { F.ri_read, F.ri_write, F.ri_mmap, F.ri_caps }, nil, "flags")
    local index = c:u32(F.ri_index, nil, "index")
    local capoff = c:u32(F.ri_cap_offset, nil, "cap_offset")
    local size = c:u64(F.ri_size, nil, "size")
    local off = c:u64(F.ri_offset, nil, "offset")
    if not index then return "" end
    if not ctx.is_reply then
        -- a request may reserve room for the reply's capabilities; the content is ignored
        if c.ok and c:left() > 0 then c:rest(F.padding) end
        return string.format("index=%s argsz=%d", region_label(index), argsz)
    end
    if not off then return string.format("index=%s", region_label(index)) end
    local s = string.format("index=%s argsz=%d flags=%s size=%s offset=%s cap_offset=%d", region_label(index),
        argsz, flag_letters(flags, { { 1, "R" }, { 2, "W" }, { 4, "M" }, { 8, "C" } }), hex64(size), hex64(off), capoff)
    if capoff ~= 0 or has(flags, 8) then
        if capoff == 0 then
            c.tree:add_proto_expert_info(E.malformed, "CAPS flag set but cap_offset is 0")
        else
            local caps = dissect_caps(c, ctx, capoff)
            if caps ~= "" then s = s .. " caps=" .. caps end
        end
        c.pos = c.stop -- the chain describes the rest of the payload
    end
    return s
end

decoders[6] = function(c, ctx) -- DEVICE_GET_REGION_IO_FDS
    local argsz = c:u32(F.argsz, nil, "argsz")
    c:u32(F.iofd_flags, nil, "flags")
    local index = c:u32(F.iofd_index, nil, "index")
    local count = c:u32(F.iofd_count, nil, "count")
    if not count then return "" end
    local s = string.format("index=%s argsz=%d count=%d", region_label(index), argsz, count)
    if ctx.is_reply and count > 0 and c:left() > 0 then
        -- entries are 40 bytes in the spec and 48 in libvfio-user
        local esz = 40
        if c:left() % count == 0 and c:left() / count == 48 then esz = 48 end
        for i = 0, math.min(count, MAX_LIST_ITEMS) - 1 do
            if c:left() < esz then
                c:truncated(c.tree, string.format("sub-region %d of %d", i, count), esz)
                break
            end
            local et = c.tree:add(proto, c.tvb:range(c.pos, esz), string.format("Sub-region %d (%d bytes)", i, esz))
            c:u64(F.iofd_e_offset, et)
            c:u64(F.iofd_e_size, et)
            c:u32(F.iofd_e_fd_index, et)
            c:u32(F.iofd_e_type, et)
            c:u32(F.iofd_e_flags, et)
            c:take(esz - 28, F.iofd_e_rest, et)
        end
    end
    return s
end

decoders[7] = function(c, ctx) -- DEVICE_GET_IRQ_INFO
    c:u32(F.argsz, nil, "argsz")
    local flags = c:flags32(F.irq_flags, { F.irq_eventfd, F.irq_maskable, F.irq_automasked, F.irq_noresize }, nil, "flags")
    local index = c:u32(F.irq_index, nil, "index")
    local count = c:u32(F.irq_count, nil, "count")
    if not index then return "" end
    if ctx.is_reply and count then
        return string.format("index=%s flags=0x%x count=%d", irq_label(index), flags, count)
    end
    return string.format("index=%s", irq_label(index))
end

decoders[8] = function(c, ctx) -- DEVICE_SET_IRQS
    if ctx.is_reply then return "" end
    c:u32(F.argsz, nil, "argsz")
    local flags = c:flags32(F.si_flags, { F.si_none, F.si_bool, F.si_eventfd, F.si_mask, F.si_unmask, F.si_trigger }, nil, "flags")
    local index = c:u32(F.si_index, nil, "index")
    local start = c:u32(F.si_start, nil, "start")
    local count = c:u32(F.si_count, nil, "count")
    if not count then return "" end
    local names = {}
    for _, b in ipairs({ { 0x1, "NONE" }, { 0x2, "BOOL" }, { 0x4, "EVENTFD" }, { 0x8, "MASK" }, { 0x10, "UNMASK" }, { 0x20, "TRIGGER" } }) do
        if has(flags, b[1]) then names[#names + 1] = b[2] end
    end
    local ndata = (has(flags, 1) and 1 or 0) + (has(flags, 2) and 1 or 0) + (has(flags, 4) and 1 or 0)
    local nact = (has(flags, 8) and 1 or 0) + (has(flags, 0x10) and 1 or 0) + (has(flags, 0x20) and 1 or 0)
    if ndata ~= 1 or nact ~= 1 then
        c.tree:add_proto_expert_info(E.malformed, "SET_IRQS needs exactly one DATA_* and one ACTION_* flag")
    end
    local s = string.format("index=%s %s start=%d count=%d", irq_label(index), table.concat(names, "|"), start, count)
    if has(flags, 2) then
        local vals = {}
        local n = math.min(count, MAX_LIST_ITEMS)
        for i = 0, n - 1 do
            local r = c:take(1, F.si_boolval, nil, string.format("bool %d of %d", i, count))
            if not r then break end
            if #vals < 16 then vals[#vals + 1] = tostring(r:le_uint()) end
        end
        if count > n and c.ok then c:data(count - n, F.data, nil, "bool data") end
        s = s .. " data=" .. table.concat(vals, ",") .. (count > 16 and ",.." or "")
    elseif has(flags, 4) then
        local fdn = ctx.fd_count
        if fdn and fdn ~= 0 and fdn ~= count then
            c.tree:add_proto_expert_info(E.note, string.format("%d fds passed for count %d", fdn, count))
        end
        if c:left() > 0 then c:rest(F.data) end -- some clients append an fd-number array
    end
    return s
end

local function region_rw(c, ctx, with_data)
    local off = c:u64(F.rg_offset, nil, "offset")
    local region = c:u32(F.rg_index, nil, "region")
    local count = c:u32(F.rg_count, nil, "count")
    if not count then return "" end
    local s = string.format("region=%s offset=%s count=%d", region_label(region), hex64(off), count)
    if with_data then
        local r = c:data(count, F.data, nil, "count")
        if r then s = s .. " data=" .. hexbytes(r, 16) end
    end
    return s
end

decoders[9] = function(c, ctx) -- REGION_READ
    if ctx.is_reply and c:left() == 0 then return "(no data)" end
    return region_rw(c, ctx, ctx.is_reply)
end

decoders[10] = function(c, ctx) -- REGION_WRITE
    return region_rw(c, ctx, not ctx.is_reply)
end

local function dma_rw(c, ctx, with_data)
    if ctx.is_reply and c:left() == 0 then
        return "(header only)"
    end
    local addr = c:u64(F.dma_addr, nil, "address")
    if not addr then return "" end
    -- spec/libvfio-user: count is a u64 and data starts at P+16; QEMU uses a u32 and P+12
    local count, qemu_layout = nil, false
    if c:left() >= 8 then
        local r8 = c.tvb:range(c.pos, 8)
        local c64 = r8:le_uint64()
        if c64:higher() ~= 0 and with_data then
            count = c:u32(F.dma_count32, nil, "count")
            qemu_layout = true
            c.tree:add_proto_expert_info(E.note,
                "count does not fit the spec's u64 layout; decoded with QEMU's layout (u32 count, data at offset 28)")
        else
            c:u64(F.dma_count, nil, "count")
            count = c64
        end
    else
        count = c:u32(F.dma_count32, nil, "count")
    end
    if not count then return string.format("addr=%s", hex64(addr)) end
    local s = string.format("addr=%s count=%s", hex64(addr), tostring(count))
    if with_data then
        local r = c:data(count, F.data, nil, "count")
        if r then s = s .. " data=" .. hexbytes(r, 16) end
        -- QEMU sizes the message as 32 + count, so 4 bytes follow the data
        if qemu_layout and c.ok and c:left() > 0 then c:rest(F.padding) end
    end
    return s
end

decoders[11] = function(c, ctx) -- DMA_READ (server -> client)
    return dma_rw(c, ctx, ctx.is_reply)
end

decoders[12] = function(c, ctx) -- DMA_WRITE (server -> client)
    return dma_rw(c, ctx, not ctx.is_reply)
end

decoders[13] = function(c, ctx) -- DEVICE_RESET: no payload
    return ""
end

decoders[14] = function(c, ctx) -- DIRTY_PAGES (removed from the protocol)
    if c:left() > 0 then c:rest(F.data) end
    return ""
end

decoders[15] = function(c, ctx) -- REGION_WRITE_MULTI
    local n = c:u64(F.wm_cnt, nil, "wr_cnt")
    if not n then return "" end
    local s = "wr_cnt=" .. tostring(n)
    if ctx.is_reply then return s end
    local cnt = n:higher() ~= 0 and math.huge or n:lower()
    local i = 0
    while i < cnt and i < MAX_LIST_ITEMS and c.ok do
        if c:left() < 24 then
            c:truncated(c.tree, string.format("write %d of %s", i, tostring(n)), 24)
            break
        end
        local et = c.tree:add(proto, c.tvb:range(c.pos, 24), string.format("Write %d", i))
        local off = c:u64(F.wm_offset, et)
        local region = c:u32(F.wm_region, et)
        local count = c:u32(F.wm_count, et)
        local r = c:take(8, F.wm_data, et)
        if count > 8 then
            et:add_proto_expert_info(E.malformed, "count is larger than the 8-byte data slot")
        end
        et:append_text(string.format(": region %s offset %s count %d data %s", region_label(region), hex64(off), count,
            hexbytes(r:range(0, math.max(1, math.min(count, 8))), 8)))
        i = i + 1
    end
    return s
end

decoders[16] = function(c, ctx) -- DEVICE_FEATURE
    local argsz = c:u32(F.argsz, nil, "argsz")
    local flags, item, r = c:u32(F.ft_flags, nil, "flags")
    if not flags then return "" end
    item:add_le(F.ft_index, r)
    item:add_le(F.ft_get, r)
    item:add_le(F.ft_set, r)
    item:add_le(F.ft_probe, r)
    local feature = flags % 0x10000
    local ops = {}
    if has(flags, 0x10000) then ops[#ops + 1] = "GET" end
    if has(flags, 0x20000) then ops[#ops + 1] = "SET" end
    if has(flags, 0x40000) then ops[#ops + 1] = "PROBE" end
    local s = string.format("feature=%d(%s) %s", feature, name_or_q(FEATURE_NAMES, feature), table.concat(ops, "|"))
    if c:left() <= 0 then return s end
    local dt = c.tree:add(proto, c.tvb:range(c.pos, c:left()), "Feature data")
    if feature == 1 and c:left() >= 8 then -- MIGRATION
        local v = c:u64(F.ft_mig_flags, dt)
        local lo = v:lower()
        local names = {}
        if has(lo, 1) then names[#names + 1] = "STOP_COPY" end
        if has(lo, 2) then names[#names + 1] = "P2P" end
        if has(lo, 4) then names[#names + 1] = "PRE_COPY" end
        s = s .. " mig_flags=" .. (#names > 0 and table.concat(names, "|") or "0")
    elseif feature == 2 and c:left() >= 4 then -- MIG_DEVICE_STATE
        local st = c:u32(F.ft_state, dt, "device_state")
        if c:left() >= 4 then c:take(4, F.ft_data_fd, dt) end
        s = s .. string.format(" state=%d(%s)", st, name_or_q(MIG_STATE_NAMES, st))
    elseif (feature == 6 or feature == 7) and c:left() >= 16 then -- DMA_LOGGING_START/STOP
        local pg = c:u64(F.ft_page_size, dt, "page_size")
        local nr = c:u32(F.ft_num_ranges, dt, "num_ranges")
        c:u32(F.ft_reserved, dt, "reserved")
        for i = 0, math.min(nr, MAX_LIST_ITEMS) - 1 do
            if c:left() < 16 then
                c:truncated(dt, string.format("range %d of %d", i, nr), 16)
                break
            end
            local rt = dt:add(proto, c.tvb:range(c.pos, 16), string.format("Range %d", i))
            local iova = c:u64(F.ft_iova, rt)
            local len = c:u64(F.ft_length, rt)
            rt:append_text(string.format(": iova %s length %s", hex64(iova), hex64(len)))
        end
        s = s .. string.format(" page_size=%s ranges=%d", tostring(pg), nr)
    elseif feature == 8 and c:left() >= 24 then -- DMA_LOGGING_REPORT
        local iova = c:u64(F.ft_iova, dt, "iova")
        local len = c:u64(F.ft_length, dt, "length")
        local pg = c:u64(F.ft_page_size, dt, "page_size")
        s = s .. string.format(" iova=%s length=%s page_size=%s", hex64(iova), hex64(len), tostring(pg))
        if c:left() > 0 then
            local bm = c:rest(F.ft_bitmap, dt)
            s = s .. " bitmap=" .. hexbytes(bm, 8)
        end
    elseif feature == 9 and c:left() >= 8 then -- MIG_DATA_SIZE
        local v = c:u64(F.ft_stop_copy_len, dt)
        s = s .. " stop_copy_length=" .. tostring(v)
    else
        local d = c:rest(F.data, dt)
        s = s .. " data=" .. hexbytes(d, 16)
    end
    if argsz and argsz ~= c.stop - HDR_LEN and ctx.is_reply then
        -- argsz covers the reply payload; only a note, servers differ here
        dt:add_proto_expert_info(E.note, string.format("argsz %d differs from the payload size %d", argsz, c.stop - HDR_LEN))
    end
    return s
end

decoders[17] = function(c, ctx) -- MIG_DATA_READ
    local argsz = c:u32(F.argsz, nil, "argsz")
    local size = c:u32(F.mig_size, nil, "size")
    if not size then return "" end
    local s = string.format("argsz=%d size=%d", argsz, size)
    if ctx.is_reply then
        c:data(size, F.data, nil, "size")
        if c.ok and c:left() > 0 then c:rest(F.padding) end -- libvfio-user pads to the requested size
    end
    return s
end

decoders[18] = function(c, ctx) -- MIG_DATA_WRITE
    if ctx.is_reply then return "" end
    local argsz = c:u32(F.argsz, nil, "argsz")
    local size = c:u32(F.mig_size, nil, "size")
    if not size then return "" end
    c:data(size, F.data, nil, "size")
    return string.format("argsz=%d size=%d", argsz, size)
end

-- Messages whose payload is normally empty.
local function empty_payload(cmd, is_reply)
    if cmd == 13 then return true end
    if is_reply then return cmd == 2 or cmd == 8 or cmd == 18 end
    return false
end

---------------------------------------------------------------------------
-- Packet comment (recorder metadata)
---------------------------------------------------------------------------

local function fd_role(cmd, is_reply, i, ctx)
    if cmd == 2 and not is_reply then return "backs the mapped range" end
    if cmd == 8 and not is_reply and ctx.set_irqs_start then
        return string.format("vector %d", ctx.set_irqs_start + i)
    end
    if cmd == 5 and is_reply then return "region mmap fd" end
    if cmd == 6 and is_reply then return string.format("fd_index %d", i) end
    return nil
end

local function add_comment_info(tree, cmt, ctx, hdr)
    local ct = tree:add(proto, "Recorder metadata (packet comment)")
    ct:set_generated()
    if type(cmt.dir) == "string" then ct:add(F.cap_dir, cmt.dir):set_generated() end
    if type(cmt.conn) == "number" then ct:add(F.cap_conn, cmt.conn):set_generated() end
    if type(cmt.name) == "string" then ct:add(F.cap_name, cmt.name):set_generated() end
    if type(cmt.seg) == "number" then ct:add(F.cap_seg, cmt.seg):set_generated() end
    if type(cmt.nseg) == "number" then ct:add(F.cap_nseg, cmt.nseg):set_generated() end
    if cmt.incomplete == true then ct:add(F.cap_incomplete, true):set_generated() end
    if cmt.raw == true then ct:add(F.cap_raw, true):set_generated() end
    if hdr and type(cmt.id) == "number" and type(cmt.cmd) == "number" and
        (cmt.id ~= hdr.id or cmt.cmd ~= hdr.cmd) then
        ct:add_proto_expert_info(E.comment, string.format(
            "Comment describes id=%d cmd=%d, header has id=%d cmd=%d", cmt.id, cmt.cmd, hdr.id, hdr.cmd))
    end
    local fds = cmt.fds
    if type(fds) ~= "table" then return nil end
    local n = #fds
    ct:add(F.fd_count, n):set_generated()
    local parts = {}
    for i, fd in ipairs(fds) do
        if type(fd) == "table" then
            local kind = type(fd.kind) == "string" and fd.kind or "?"
            local text = kind
            local size = type(fd.size) == "number" and fd.size or nil
            if size then text = text .. " size=" .. string.format("%d", size) end
            local nm = fd.name or fd.path or fd.link
            if type(nm) == "string" then text = text .. " " .. nm end
            local role = hdr and fd_role(hdr.cmd, hdr.is_reply, i - 1, ctx)
            local label = string.format("fd[%d]: %s%s", i - 1, text, role and (" (" .. role .. ")") or "")
            local it = ct:add(F.fd, label)
            it:set_generated()
            it:add(F.fd_kind, kind):set_generated()
            if size then it:add(F.fd_size, UInt64.new(size % 4294967296, math.floor(size / 4294967296))):set_generated() end
            if type(nm) == "string" then it:add(F.fd_name, nm):set_generated() end
            parts[#parts + 1] = kind .. (size and (":" .. string.format("%d", size)) or "")
        end
    end
    return n, table.concat(parts, ",")
end

---------------------------------------------------------------------------
-- One message
---------------------------------------------------------------------------

local function opposite(dir)
    if dir == "c2s" then return "s2c" end
    if dir == "s2c" then return "c2s" end
    return dir
end

-- tvb: a buffer that starts with the header; len may be < msg_size (truncated)
local function dissect_message(tvb, pinfo, tree, pkt)
    local len = tvb:len()
    local id = tvb:range(0, 2):le_uint()
    local cmd = tvb:range(2, 2):le_uint()
    local msg_size = tvb:range(4, 4):le_uint()
    local flags = tvb:range(8, 4):le_uint()
    local err = tvb:range(12, 4):le_uint()
    local mtype = flags % 16
    local is_reply = mtype == 1
    local no_reply = has(flags, 0x10)
    local is_error = has(flags, 0x20)
    local name = CMD_NAMES[cmd] or string.format("CMD%d", cmd)

    local dir, guessed = pkt.dir, false
    if not dir then
        guessed = true
        local from_server = (cmd == 11 or cmd == 12)
        if is_reply then from_server = not from_server end
        dir = from_server and "s2c" or "c2s"
    end

    local mt = tree:add(proto, tvb:range(0, len))
    mt:append_text(string.format(", %s %s, ID 0x%04x", name, is_reply and "Reply" or "Command", id))

    local ht = mt:add(proto, tvb:range(0, HDR_LEN), "Header")
    ht:add_le(F.msg_id, tvb:range(0, 2))
    local cmd_item = ht:add_le(F.command, tvb:range(2, 2))
    local size_item = ht:add_le(F.msg_size, tvb:range(4, 4))
    local fl_item = ht:add_le(F.flags, tvb:range(8, 4))
    fl_item:add_le(F.flags_type, tvb:range(8, 4))
    fl_item:add_le(F.flags_no_reply, tvb:range(8, 4))
    fl_item:add_le(F.flags_error, tvb:range(8, 4))
    if flags >= 0x40 then
        fl_item:add_le(F.flags_reserved, tvb:range(8, 4))
        fl_item:add_proto_expert_info(E.bad_flags, "Reserved flag bits are set")
    end
    local err_item = ht:add_le(F.error, tvb:range(12, 4))
    local dir_item = mt:add(F.direction, dir)
    dir_item:set_generated()
    if guessed then dir_item:append_text(" (guessed from the command)") end

    if not CMD_NAMES[cmd] then
        cmd_item:add_proto_expert_info(E.unknown_cmd, string.format("Unknown command %d", cmd))
    end
    if mtype > 1 then
        fl_item:add_proto_expert_info(E.bad_flags, string.format("Unknown message type %d", mtype))
    end
    if is_error and not is_reply then
        fl_item:add_proto_expert_info(E.bad_flags, "ERROR flag on a command")
    end
    if err ~= 0 and not is_error then
        err_item:add_proto_expert_info(E.bad_flags, "Non-zero error field without the ERROR flag")
    end
    if len < msg_size then
        size_item:add_proto_expert_info(E.truncated, string.format(
            "msg_size is %d but only %d bytes are present", msg_size, len))
    end

    local kind = is_reply and "reply" or "cmd"
    if no_reply then kind = kind .. "/NR" end
    if is_error then kind = kind .. "/ERR" end

    -- request/response tracking (first pass builds the links)
    local key_here = pinfo.number .. ":" .. pkt.index
    local reqdir = is_reply and opposite(dir) or dir
    local rkey = table.concat({ pkt.stream, id, cmd, reqdir }, "|")
    if not pinfo.visited then
        if not is_reply then
            if not no_reply then
                local q = pending_reqs[rkey]
                if not q then q = {}; pending_reqs[rkey] = q end
                q[#q + 1] = { frame = pinfo.number, key = key_here, ts = pinfo.abs_ts }
            end
            links[key_here] = links[key_here] or {}
        else
            local q = pending_reqs[rkey]
            local req = q and table.remove(q, 1)
            if req then
                links[key_here] = { req = req.frame, delta = pinfo.abs_ts - req.ts }
                local l = links[req.key] or {}
                l.resp = pinfo.number
                links[req.key] = l
            else
                links[key_here] = { unmatched = true }
            end
        end
    end
    local lk = links[key_here]
    if lk then
        if lk.resp then mt:add(F.response_in, lk.resp):set_generated() end
        if lk.req then
            mt:add(F.request_in, lk.req):set_generated()
            if lk.delta then
                local d = math.max(0, lk.delta)
                local secs = math.floor(d)
                local ns = math.floor((d - secs) * 1e9 + 0.5)
                if ns >= 1e9 then secs = secs + 1; ns = ns - 1e9 end
                mt:add(F.response_time, NSTime.new(secs, ns)):set_generated()
            end
        end
        if lk.unmatched then mt:add_proto_expert_info(E.unmatched) end
    end

    -- payload
    local ctx = { cmd = cmd, is_reply = is_reply, pinfo = pinfo, msg_size = msg_size }
    if pkt.cmt and pkt.index == 1 then
        -- SET_IRQS: fd i is vector start+i
        if cmd == 8 and not is_reply and len >= 32 then ctx.set_irqs_start = tvb:range(28, 4):le_uint() end
        ctx.fd_count, ctx.fd_desc = add_comment_info(mt, pkt.cmt, ctx, { id = id, cmd = cmd, is_reply = is_reply })
    end

    local summary = ""
    local payload_len = len - HDR_LEN
    if is_error then
        local code = string.format("%d(%s)", err, name_or_q(ERRNO_NAMES, err))
        mt:add_proto_expert_info(E.error_reply, string.format("Error reply to %s: errno %s", name, code))
        summary = "err=" .. code
        if payload_len > 0 then mt:add(F.data, tvb:range(HDR_LEN, payload_len)) end
    elseif payload_len > 0 or not empty_payload(cmd, is_reply) then
        local pt = mt
        if payload_len > 0 then
            pt = mt:add(proto, tvb:range(HDR_LEN, payload_len), "Payload")
            pt:append_text(string.format(" (%d bytes)", payload_len))
        end
        local c = cursor(tvb, pt, HDR_LEN, len, pinfo)
        local dec = decoders[cmd]
        if payload_len == 0 then
            if not is_reply then
                mt:add_proto_expert_info(E.truncated, string.format("%s command without payload", name))
            elseif cmd ~= 9 and cmd ~= 11 and cmd ~= 12 then
                mt:add_proto_expert_info(E.note, string.format("%s reply without payload", name))
            end
            if dec and (cmd == 9 or cmd == 11 or cmd == 12) then
                local ok, s = pcall(dec, c, ctx)
                if ok and s then summary = s end
            end
        elseif dec then
            local ok, s = pcall(dec, c, ctx)
            if ok then
                summary = s or ""
                c:finish(pt)
            else
                -- should not happen; keep the packet readable anyway
                pt:add_proto_expert_info(E.malformed, "Could not decode payload: " .. tostring(s))
            end
        else
            c:rest(F.data)
        end
    end
    if ctx.fd_count and ctx.fd_count > 0 and ctx.fd_desc then
        summary = (summary ~= "" and (summary .. " ") or "") .. "fds=" .. ctx.fd_desc
    end

    local line = string.format("%s %s %s id=0x%04x", dir, name, kind, id)
    if summary ~= "" then line = line .. " " .. summary end
    if len < msg_size then line = line .. string.format(" [truncated %d/%d]", len, msg_size) end
    return line
end

---------------------------------------------------------------------------
-- Packet level: split the TCP payload into messages, reassemble if needed
---------------------------------------------------------------------------

local function packet_direction(pinfo, cmt)
    local sp = proto.prefs.port
    if pinfo.dst_port == sp and pinfo.src_port ~= sp then return "c2s" end
    if pinfo.src_port == sp and pinfo.dst_port ~= sp then return "s2c" end
    if cmt and (cmt.dir == "c2s" or cmt.dir == "s2c") then return cmt.dir end
    return nil
end

local function set_info(pinfo, lines)
    if #lines == 0 then return end
    pinfo.cols.protocol:set("vfio-user")
    pcall(function() pinfo.cols.info:clear_fence() end)
    pinfo.cols.info:set(table.concat(lines, " ; "))
end

local function dissect_raw_rest(tvb, offset, tree, what)
    local n = tvb:len() - offset
    if n <= 0 then return end
    local t = tree:add(proto, tvb:range(offset, n))
    t:append_text(string.format(", %s (%d bytes)", what, n))
    local it = t:add(F.raw, tvb:range(offset, n))
    it:add_proto_expert_info(E.malformed, what)
end

local function dissect_packet(tvb, pinfo, tree)
    local len = tvb:len()
    if len == 0 then return 0 end
    pinfo.cols.protocol:set("vfio-user")

    local cmt = nil
    if proto.prefs.show_comment then cmt = packet_comment(pinfo) end
    local stream = stream_id()
    local dir = packet_direction(pinfo, cmt)

    -- The message that ends in this frame may have started in earlier frames
    -- (recorder segments: fds are listed on seg 0 only).
    local eff = effective_cmt[pinfo.number]
    if eff == nil then
        eff = cmt or false
        if cmt and type(cmt.seg) == "number" and cmt.seg > 0 then
            local first = seg_pending[stream .. "|" .. tostring(dir)]
            if first then
                eff = {}
                for k, v in pairs(cmt) do eff[k] = v end
                eff.fds = first.fds
                eff.seg = first.seg
                seg_pending[stream .. "|" .. tostring(dir)] = nil
            end
        end
        if not pinfo.visited then effective_cmt[pinfo.number] = eff end
    end
    eff = eff or nil

    local lines = {}
    local no_reassembly = (cmt and (cmt.incomplete == true)) or pinfo.can_desegment == 0
    if cmt and cmt.raw == true then
        local t = tree:add(proto, tvb:range(0, len))
        t:append_text(string.format(", unparsed data (%d bytes)", len))
        if proto.prefs.show_comment then add_comment_info(t, cmt, {}, nil) end
        t:add(F.raw, tvb:range(0, len)):add_proto_expert_info(E.note,
            "The recorder stopped parsing this direction (msg_size out of range earlier)")
        set_info(pinfo, { string.format("%s RAW %d bytes", dir or "?", len) })
        return len
    end

    if cmt and type(cmt.seg) == "number" and cmt.seg > 0 and no_reassembly then
        local t = tree:add(proto, tvb:range(0, len))
        t:append_text(string.format(", continuation of a segmented message (segment %d)", cmt.seg))
        t:add(F.data, tvb:range(0, len))
        set_info(pinfo, { string.format("%s [segment %d of %s, enable TCP reassembly]", dir or "?", cmt.seg, tostring(cmt.nseg)) })
        return len
    end

    local offset = 0
    local index = 0
    while offset < len do
        local remaining = len - offset
        if remaining < HDR_LEN then
            if not no_reassembly then
                if index == 0 and cmt and not pinfo.visited then seg_pending[stream .. "|" .. tostring(dir)] = cmt end
                pinfo.desegment_offset = offset
                pinfo.desegment_len = DESEGMENT_ONE_MORE_SEGMENT
                break
            end
            dissect_raw_rest(tvb, offset, tree, "Truncated header")
            lines[#lines + 1] = string.format("%s [truncated header, %d bytes]", dir or "?", remaining)
            break
        end
        local msg_size = tvb:range(offset + 4, 4):le_uint()
        if msg_size < HDR_LEN or msg_size > MAX_MSG_SIZE then
            -- not a usable header: show it, then the rest as raw bytes
            local t = tree:add(proto, tvb:range(offset, remaining))
            t:append_text(", invalid header")
            t:add_le(F.msg_id, tvb:range(offset, 2))
            t:add_le(F.command, tvb:range(offset + 2, 2))
            t:add_le(F.msg_size, tvb:range(offset + 4, 4)):add_proto_expert_info(E.bad_size, string.format(
                "msg_size %d is outside 16..%d; the rest of the segment is not parsed", msg_size, MAX_MSG_SIZE))
            t:add_le(F.flags, tvb:range(offset + 8, 4))
            t:add_le(F.error, tvb:range(offset + 12, 4))
            if remaining > HDR_LEN then t:add(F.raw, tvb:range(offset + HDR_LEN, remaining - HDR_LEN)) end
            lines[#lines + 1] = string.format("%s [invalid msg_size %d]", dir or "?", msg_size)
            break
        end
        if msg_size > remaining and not no_reassembly then
            if index == 0 and cmt and not pinfo.visited then seg_pending[stream .. "|" .. tostring(dir)] = cmt end
            pinfo.desegment_offset = offset
            pinfo.desegment_len = msg_size - remaining
            break
        end
        local take = math.min(msg_size, remaining)
        index = index + 1
        local pkt = { dir = dir, stream = stream, index = index, cmt = (index == 1) and eff or nil }
        local ok, line = pcall(dissect_message, tvb:range(offset, take):tvb(), pinfo, tree, pkt)
        if not ok then
            tree:add_proto_expert_info(E.malformed, "Dissector problem: " .. tostring(line))
            line = string.format("%s [undecodable message]", dir or "?")
        end
        lines[#lines + 1] = line
        offset = offset + take
    end
    set_info(pinfo, lines)
    return len
end

function proto.dissector(tvb, pinfo, tree)
    local ok, r = pcall(dissect_packet, tvb, pinfo, tree)
    if ok then return r end
    tree:add_proto_expert_info(E.malformed, "Dissector problem: " .. tostring(r))
    return tvb:len()
end

---------------------------------------------------------------------------
-- Registration
---------------------------------------------------------------------------

local registered_port = nil
local function register_port()
    local t = DissectorTable.get("tcp.port")
    if registered_port then t:remove(registered_port, proto) end
    registered_port = proto.prefs.port
    if registered_port and registered_port > 0 then t:add(registered_port, proto) end
end

function proto.prefs_changed()
    if registered_port ~= proto.prefs.port then register_port() end
end

register_port()

-- Heuristic for other ports: every complete header in the segment must be
-- plausible, and the messages must tile the segment (the last may continue).
local function looks_like_vfio_user(tvb)
    local len = tvb:len()
    if len < HDR_LEN then return false end
    local offset = 0
    while offset < len do
        if len - offset < HDR_LEN then return false end
        local cmd = tvb:range(offset + 2, 2):le_uint()
        local size = tvb:range(offset + 4, 4):le_uint()
        local flags = tvb:range(offset + 8, 4):le_uint()
        local err = tvb:range(offset + 12, 4):le_uint()
        if not CMD_NAMES[cmd] or cmd == 14 then return false end
        if size < HDR_LEN or size > MAX_MSG_SIZE then return false end
        if flags >= 0x40 or flags % 16 > 1 then return false end
        if has(flags, 0x20) then
            if flags % 16 ~= 1 or err == 0 or err > 4096 then return false end
        elseif err ~= 0 then
            return false
        end
        offset = offset + size
    end
    return true
end

local function heuristic(tvb, pinfo, tree)
    if not proto.prefs.heuristic then return false end
    local ok, yes = pcall(looks_like_vfio_user, tvb)
    if not ok or not yes then return false end
    pinfo.conversation = proto
    proto.dissector(tvb, pinfo, tree)
    return true
end

pcall(function() proto:register_heuristic("tcp", heuristic) end)
