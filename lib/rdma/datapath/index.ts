// The RDMA data-path building blocks: ring layouts and codecs, MR translation
// with the DMA-key policy, and the byte-moving operations. Pure: everything
// reaches guest memory through GuestMemory and MRs through MrTable.

export * from './layouts';
export * from './translate';
export * from './ops';
