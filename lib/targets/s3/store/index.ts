// The S3 store: contents and limits, optional persistence, and the HTTP face.
export { ObjectStore } from './objects';
export { createS3Server, s3Handler } from './server';
export type { S3RequestHandler } from './server';
export type { S3ServerOptions } from './context';
export type { Credentials } from './sigv4';
export { decodeAwsChunked, isAwsChunked } from './chunked';
