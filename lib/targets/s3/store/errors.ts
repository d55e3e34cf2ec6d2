// S3 error codes the store answers with: the HTTP status and the message,
// one table (modelled on the S3 API reference's error list). Handlers return
// a code from here; the server turns it into the XML <Error> document.

export const S3_ERRORS = {
  AccessDenied: { status: 403, message: 'Access Denied' },
  BadDigest: { status: 400, message: 'The Content-MD5 or checksum you specified did not match what we received.' },
  BucketAlreadyOwnedByYou: {
    status: 409,
    message: 'Your previous request to create the named bucket succeeded and you already own it.',
  },
  EntityTooLarge: { status: 400, message: 'Your proposed upload exceeds the maximum allowed object size.' },
  EntityTooSmall: { status: 400, message: 'Your proposed upload is smaller than the minimum allowed object size.' },
  IncompleteBody: {
    status: 400,
    message: 'You did not provide the number of bytes specified by the Content-Length HTTP header.',
  },
  InsufficientStorage: { status: 507, message: 'The store has no room for this object.' },
  InternalError: { status: 500, message: 'We encountered an internal error. Please try again.' },
  InvalidAccessKeyId: { status: 403, message: 'The AWS access key Id you provided does not exist in our records.' },
  InvalidArgument: { status: 400, message: 'Invalid Argument' },
  InvalidBucketName: { status: 400, message: 'The specified bucket is not valid.' },
  InvalidDigest: { status: 400, message: 'The Content-MD5 or checksum you specified is not valid.' },
  InvalidPart: { status: 400, message: 'One or more of the specified parts could not be found.' },
  InvalidPartOrder: { status: 400, message: 'The list of parts was not in ascending order.' },
  InvalidRange: { status: 416, message: 'The requested range is not satisfiable' },
  InvalidRequest: { status: 400, message: 'Invalid Request' },
  MalformedXML: {
    status: 400,
    message: 'The XML you provided was not well-formed or did not validate against our published schema.',
  },
  MethodNotAllowed: { status: 405, message: 'The specified method is not allowed against this resource.' },
  MissingContentLength: { status: 411, message: 'You must provide the Content-Length HTTP header.' },
  NoSuchBucket: { status: 404, message: 'The specified bucket does not exist' },
  NoSuchKey: { status: 404, message: 'The specified key does not exist.' },
  NoSuchUpload: { status: 404, message: 'The specified multipart upload does not exist.' },
  NotImplemented: {
    status: 501,
    message: 'A header or operation you provided implies functionality that is not implemented.',
  },
  RequestTimeTooSkewed: {
    status: 403,
    message: "The difference between the request time and the server's time is too large.",
  },
  SignatureDoesNotMatch: {
    status: 403,
    message: 'The request signature we calculated does not match the signature you provided.',
  },
  SlowDown: { status: 503, message: 'Please reduce your request rate.' },
  TooManyObjects: { status: 507, message: 'The store holds as many objects as it may.' },
  XAmzContentSHA256Mismatch: {
    status: 400,
    message: "The provided 'x-amz-content-sha256' header does not match what was computed.",
  },
} as const;

type S3ErrorCode = keyof typeof S3_ERRORS;

/** An S3 error as a value: the code, and a detail for the message when there is one. */
export interface S3Error {
  readonly code: S3ErrorCode;
  readonly detail?: string;
}

export function s3err(code: S3ErrorCode, detail?: string): S3Error {
  return detail === undefined ? { code } : { code, detail };
}

export type S3Result<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: S3Error };

export function ok<T>(value: T): S3Result<T> {
  return { ok: true, value };
}

export function fail<T>(code: S3ErrorCode, detail?: string): S3Result<T> {
  return { ok: false, error: s3err(code, detail) };
}
