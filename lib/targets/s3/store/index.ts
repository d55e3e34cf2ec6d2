// The S3 store: contents and limits, optional persistence, and the HTTP face.
export { ObjectStore, MAX_KEY_BYTES, MAX_LIST_KEYS, MAX_PART_NUMBER, MAX_UPLOADS, md5hex } from './objects';
export type { StoreLimits, StoredObject, StoredPart, ListPage, ListQuery } from './objects';
export { createS3Server, s3Handler } from './server';
export { parseRange } from './object-headers';
export { RDMA_TOKEN_HEADER, RDMA_REPLY_HEADER, RDMA_BYTES_HEADER } from './context';
export type { RequestOrigin, S3RequestHandler } from './server';
export type { S3ServerOptions, RdmaHook } from './context';
export { S3_ERRORS, s3err, ok, fail } from './errors';
export type { S3Error, S3ErrorCode, S3Result } from './errors';
export { verifySigV4 } from './sigv4';
export type { Credentials } from './sigv4';
export { decodeAwsChunked, isAwsChunked } from './chunked';
